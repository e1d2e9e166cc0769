# parmacs.mk: builds a SPLASH-2/3 program for iccs the suite's way, keeping each program's own
# flags (dsm/README.md, "Building SPLASH-3"). The suite's Makefile.config gets one line at its end,
#     -include $(ICCS_MK)
# and a program is built in its directory with
#     make ICCS_MK=$(pkg-config --variable=parmacs_mk iccs)
# (without ICCS_MK the same tree builds the pthread version). Included from Makefile.config, before
# a program's Makefile adds its own flags (radiosity's -I./glibdumb, volrend's -I./libtiff and
# -ltiff), which are then kept; sub-makes (radiosity's glibdumb) get ICCS_MK too.
MACROS := $(dir $(lastword $(MAKEFILE_LIST)))parmacs.m4
CFLAGS += $(shell pkg-config --cflags iccs)
LDFLAGS += $(shell pkg-config --libs iccs)

# A program links libiccs.a, a static archive, with this linker script and export list: make then
# relinks it when one of them changed (iccs rebuilt), not only when the program's own objects did;
# without it a rebuilt iccs left the program as it was linked before, silently. Every SPLASH-3
# Makefile sets TARGET before it includes Makefile.config.
ICCS_LINK_INPUTS := $(foreach v,libiccs_archive parmacs_ld parmacs_exports,$(shell pkg-config --variable=$(v) iccs))
ifneq ($(strip $(TARGET)),)
$(TARGET): $(ICCS_LINK_INPUTS)
endif

// The machine configuration: the issue's example, defaults, the example file, every kind of error
// message (key, value and what is allowed), command-line overrides, and the dump round trip.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "config.hpp"
#include "runtime_launch.hpp"

using namespace iccs;

namespace {

const char* const kIssueExample = R"(
[machine]
clusters = 2
fabric = "memif"          # memif | af_packet | pci
[cluster]
compute_threads = 2
proxies = "auto"          # integer, or auto = ceil(sqrt(compute_threads))
proxy_cores = [1]         # pinning; defaults spread over the host's cores
polling = "adaptive"      # busy | adaptive | inline
)";

// The error of loading `text`, or "" when it loads.
std::string error_of(const std::string& text) {
    const ConfigResult r = load_config(text, "iccs.toml");
    return r.ok() ? std::string() : r.error;
}

// The repository root: from this file's path as the compiler saw it, else the working directory
// (meson runs tests in the build directory, one below the root).
std::string example_path() {
    std::string here = __FILE__;
    const std::string tail = "tests/unit/test_config.cpp";
    std::vector<std::string> candidates;
    if (here.size() >= tail.size() && here.compare(here.size() - tail.size(), tail.size(), tail) == 0)
        candidates.push_back(here.substr(0, here.size() - tail.size()) + "iccs.example.toml");
    for (const char* dir : {"", "../", "../../"}) candidates.push_back(std::string(dir) + "iccs.example.toml");
    for (const auto& c : candidates)
        if (std::ifstream(c)) return c;
    FAIL("iccs.example.toml not found (looked at " << candidates.front() << " and the working directory's parents)");
    return {};
}

// (section, key) of every assignment in a TOML text of flat sections (the example file, a dump).
std::set<std::pair<std::string, std::string>> keys_in(const std::string& text) {
    std::set<std::pair<std::string, std::string>> out;
    std::istringstream in(text);
    std::string line, section;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        if (line[0] == '[') {
            section = line.substr(1, line.find(']') - 1);
            continue;
        }
        const size_t eq = line.find(" =");
        if (eq != std::string::npos) out.insert({section, line.substr(0, eq)});
    }
    return out;
}

std::set<std::pair<std::string, std::string>> table_keys() {
    std::set<std::pair<std::string, std::string>> out;
    for (const auto& k : config_key_docs()) out.insert({std::string(k.section), std::string(k.key)});
    return out;
}

}  // namespace

TEST_CASE("config: the issue's example loads and proxies = auto resolves", "[config]") {
    const ConfigResult r = load_config(kIssueExample, "iccs.toml");
    if (host_core_count() < 2) {  // proxy_cores = [1] needs a second core
        REQUIRE_THAT(r.error, Catch::Contains("proxy_cores[0] = 1"));
        return;
    }
    INFO(r.error);
    REQUIRE(r.ok());
    const MachineConfig& c = *r.config;
    CHECK(c.machine.clusters == 2);
    CHECK(c.machine.fabric == Fabric::kMemif);
    CHECK(c.cluster.compute_threads == 2);
    CHECK(c.cluster.proxies == kProxiesAuto);
    CHECK(c.cluster.proxies_resolved == 2);
    CHECK(c.cluster.proxy_cores == std::vector<uint32_t>{1});
    CHECK(c.cluster.polling == Polling::kAdaptive);
    CHECK(proxy_ip(c, 0, 0) == Ipv4Addr{0x0a000001});
    CHECK(proxy_ip(c, 1, 1) == Ipv4Addr{0x0a000102});
}

TEST_CASE("config: auto proxies = ceil(sqrt(compute_threads))", "[config]") {
    const std::pair<uint32_t, uint32_t> cases[] = {{1, 1},  {2, 2},  {3, 2},  {4, 2},  {5, 3},   {9, 3},
                                                   {10, 4}, {16, 4}, {17, 5}, {64, 8}, {255, 16}, {256, 16}};
    for (const auto& [threads, proxies] : cases) {
        INFO("compute_threads = " << threads);
        CHECK(resolve_proxies(kProxiesAuto, threads) == proxies);
        const ConfigResult r =
            load_config("[cluster]\ncompute_threads = " + std::to_string(threads) + "\nproxies = \"auto\"\n", "t.toml");
        REQUIRE(r.ok());
        CHECK(r.config->cluster.proxies_resolved == proxies);
    }
    CHECK(resolve_proxies(3, 16) == 3);  // an integer is taken as it is
    const ConfigResult fixed = load_config("[cluster]\nproxies = 5\n", "t.toml");
    REQUIRE(fixed.ok());
    CHECK(fixed.config->cluster.proxies == 5);
    CHECK(fixed.config->cluster.proxies_resolved == 5);
}

TEST_CASE("config: an empty file gives every default", "[config]") {
    for (const char* text : {"", "# nothing but a comment\n", "[machine]\n[cluster]\n[test]\n"}) {
        const ConfigResult r = load_config(text, "empty.toml");
        INFO(r.error);
        REQUIRE(r.ok());
        CHECK(*r.config == MachineConfig{});
    }
    const MachineConfig d;
    CHECK(d.machine.clusters == 2);
    CHECK(d.machine.mtu_bytes == 1500);
    CHECK(d.cluster.proxies_resolved == resolve_proxies(d.cluster.proxies, d.cluster.compute_threads));
    CHECK(!validate(d));
    const ConfigResult none = configure("");
    REQUIRE(none.ok());
    CHECK(*none.config == d);
}

TEST_CASE("config: iccs.example.toml loads to exactly the defaults and lists every key", "[config]") {
    const std::string path = example_path();
    const ConfigResult r = load_config_file(path);
    INFO(r.error);
    REQUIRE(r.ok());
    CHECK(*r.config == MachineConfig{});

    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    CHECK(keys_in(text.str()) == table_keys());
    CHECK_THAT(text.str(),  // the issue's example, as the minimal example at the top
               Catch::Contains("#   proxies = \"auto\"          # integer, or auto = ceil(sqrt(compute_threads))"));
    for (const auto& k : config_key_docs()) {
        INFO(k.section << "." << k.key);
        CHECK(!k.doc.empty());
        CHECK(!k.allowed.empty());
    }
}

namespace {

// Rules that tie keys together, each named with the values that break it.
void check_rules_between_keys() {
    CHECK(error_of("[slidwin]\nrto_min_us = 20000\n") ==
          "config error: [slidwin] rto_min_us = 20000, rto_initial_us = 10000, rto_max_us = 1000000: need "
          "rto_min_us <= rto_initial_us <= rto_max_us");
    CHECK_THAT(error_of("[slidwin]\ndelack_us = 1000\n"),
               Catch::StartsWith(
                   "config error: [slidwin] delack_us = 1000: must be below [slidwin] rto_min_us = 1000"));
    CHECK(error_of("[slidwin]\nack_every = 64\nrcv_buf_datagrams = 32\n") ==
          "config error: [slidwin] ack_every = 64: must be at most [slidwin] rcv_buf_datagrams = 32");
    CHECK_THAT(error_of("[machine]\nbase_ip = \"10.0.0.253\"\n"),
               Catch::StartsWith("config error: [machine] base_ip = \"10.0.0.253\" with 2 proxies per cluster"));
    CHECK_THAT(error_of("[machine]\nbase_ip = \"223.255.255.0\"\n"),
               Catch::Contains("proxy addresses would reach 224.0.0.0"));
    CHECK(error_of("[machine]\nfabric = \"pci\"\npci_addresses = [\"0000:03:00.0\"]\n") ==
          "config error: [machine] fabric = \"pci\" needs [machine] pci_addresses with 2 entries (one per proxy, "
          "one cluster per host) or 4 (2 clusters x 2 proxies, all on this host); it has 1");
    CHECK(error_of("[machine]\nfabric = \"pci\"\npci_addresses = [\"0000:03:00.0\", \"03:00.1\"]\n").empty());
    CHECK_THAT(error_of("[machine]\nfabric = \"pci\"\npci_addresses = [\"03:00.0\", \"03:00.0\"]\n"),
               Catch::Contains("pci_addresses[1] = \"03:00.0\": already used by pci_addresses[0]"));
    CHECK(error_of("[machine]\npci_addresses = [\"eth0\"]\n") ==
          "config error: iccs.toml:2: [machine] pci_addresses[0] = \"eth0\": expected a PCI address like "
          "\"0000:03:00.0\"");
    CHECK(error_of("[machine]\npci_addresses = [\"0000:03:00.0\"]\n").empty());  // ignored unless fabric = pci
}

// fabric udp: socket addresses and ports (their count, form and range), and where each proxy's socket goes.
void check_udp_addresses_and_ports() {
    CHECK(error_of("[machine]\nfabric = \"udp\"\n").empty());  // everything on 127.0.0.1
    CHECK(error_of("[machine]\nfabric = \"udp\"\nudp_addresses = [\"10.1.0.1\", \"10.1.0.2\"]\n").empty());
    CHECK(error_of("[machine]\nfabric = \"udp\"\nudp_addresses = [\"127.0.0.1\", \"127.0.0.2\", "
                   "\"127.0.0.3\", \"127.0.0.4\"]\n").empty());
    CHECK(error_of("[machine]\nfabric = \"udp\"\nudp_addresses = [\"10.1.0.1\", \"10.1.0.2\", \"10.1.0.3\"]\n") ==
          "config error: [machine] fabric = \"udp\" needs [machine] udp_addresses with 0 entries (every proxy on "
          "127.0.0.1), 2 (one per cluster) or 4 (2 clusters x 2 proxies); it has 3");
    CHECK(error_of("[machine]\nudp_addresses = [\"10.1.0.1\", \"10.1.0.2\", \"10.1.0.3\"]\n").empty());  // not udp
    CHECK(error_of("[machine]\nudp_addresses = [\"10.1.0\"]\n") ==
          "config error: iccs.toml:2: [machine] udp_addresses[0] = \"10.1.0\": expected an IPv4 unicast address "
          "like \"127.0.0.1\" (not 0.x.x.x, or 224.0.0.0 and above)");
    CHECK(error_of("[machine]\nudp_addresses = \"127.0.0.1\"\n") ==
          "config error: iccs.toml:2: [machine] udp_addresses = \"127.0.0.1\": expected an array of IPv4 "
          "addresses, e.g. [\"10.1.0.1\", \"10.1.0.2\"]");
    CHECK(error_of("[machine]\nfabric = \"udp\"\nclusters = 3\nudp_port = 65500\n") ==
          "config error: [machine] udp_port = 65500 with fabric = \"udp\", 3 clusters and 2 proxies: the last "
          "socket port (udp_port + 64*c + p) would be 65629; need udp_port <= 65406");
    CHECK(error_of("[machine]\nfabric = \"udp\"\nclusters = 3\nudp_port = 65406\n").empty());
    MachineConfig c;
    c.machine.clusters = 3;
    CHECK(udp_socket_ip(c.machine.udp_addresses, 3, 2, 2, 1) == Ipv4Addr{0x7f000001});
    CHECK(udp_socket_port(9410, 2, 1) == 9410 + 129);
    const std::vector<Ipv4Addr> per_cluster{Ipv4Addr{1}, Ipv4Addr{2}, Ipv4Addr{3}};
    CHECK(udp_socket_ip(per_cluster, 3, 2, 2, 1) == Ipv4Addr{3});
    const std::vector<Ipv4Addr> per_proxy{Ipv4Addr{1}, Ipv4Addr{2}, Ipv4Addr{3}, Ipv4Addr{4}, Ipv4Addr{5},
                                          Ipv4Addr{6}};
    CHECK(udp_socket_ip(per_proxy, 3, 2, 2, 1) == Ipv4Addr{6});
    CHECK(udp_socket_ip(per_proxy, 3, 2, 1, 0) == Ipv4Addr{3});
}

}  // namespace

TEST_CASE("config: errors name the key, the value and what is allowed", "[config]") {
    SECTION("bad enum value") {
        CHECK(error_of("[machine]\nclusters = 2\n[cluster]\npolling = \"fast\"\n") ==
              "config error: iccs.toml:4: [cluster] polling = \"fast\": allowed values are busy, adaptive, inline");
        CHECK(error_of("[machine]\nfabric = \"dpdk\"\n") ==
              "config error: iccs.toml:2: [machine] fabric = \"dpdk\": allowed values are memif, af_packet, pci, udp");
        CHECK(error_of("[cluster]\ndispatch = 1\n") ==
              "config error: iccs.toml:2: [cluster] dispatch = 1: allowed values are fixed, round-robin, least-loaded");
        CHECK(error_of("[machine]\nudp_sqpoll = \"yes\"\n") ==
              "config error: iccs.toml:2: [machine] udp_sqpoll = \"yes\": allowed values are true, false");
    }
    SECTION("integer out of range") {
        CHECK(error_of("[machine]\nclusters = 0\n") ==
              "config error: iccs.toml:2: [machine] clusters = 0: expected an integer from 1 to 64");
        CHECK(error_of("[machine]\nmtu_bytes = 9001\n") ==
              "config error: iccs.toml:2: [machine] mtu_bytes = 9001: expected an integer from 576 to 9000");
        CHECK(error_of("[cluster]\nproxies = 65\n") ==
              "config error: iccs.toml:2: [cluster] proxies = 65: expected an integer from 1 to 64, or \"auto\"");
        CHECK(error_of("[test]\ndrop = 1.5\n") ==
              "config error: iccs.toml:2: [test] drop = 1.5: expected a probability from 0.0 to 1.0");
    }
    SECTION("wrong type") {
        CHECK(error_of("[machine]\nclusters = \"two\"\n") ==
              "config error: iccs.toml:2: [machine] clusters = \"two\": expected an integer from 1 to 64");
        CHECK(error_of("[machine]\nclusters = 2.0\n") ==
              "config error: iccs.toml:2: [machine] clusters = 2.0: expected an integer from 1 to 64");
        CHECK(error_of("[cluster]\nproxy_cores = 1\n") ==
              "config error: iccs.toml:2: [cluster] proxy_cores = 1: expected an array of core numbers, e.g. [1]; "
              "each a core number from 0 to " +
                  std::to_string(host_core_count() - 1) + " (this host has " + std::to_string(host_core_count()) +
                  (host_core_count() == 1 ? " core)" : " cores)"));
        CHECK(error_of("[cluster]\nproxies = \"many\"\n") ==
              "config error: iccs.toml:2: [cluster] proxies = \"many\": expected an integer from 1 to 64, or \"auto\"");
        CHECK_THAT(error_of("machine = 3\n"), Catch::Contains("[machine] = 3: expected a section"));
    }
    SECTION("unknown key, with a suggestion") {
        CHECK(error_of("[machine]\nclusters = 2\n\n[cluster]\ncompute_threads = 2\n# pinning\nproxy_core = [1]\n") ==
              "config error: iccs.toml:7: unknown key [cluster] proxy_core (did you mean proxy_cores?)");
        CHECK(error_of("[machine]\npolling = \"busy\"\n") ==
              "config error: iccs.toml:2: unknown key [machine] polling (did you mean [cluster] polling?)");
        CHECK_THAT(error_of("[cluster]\nfrobnicate = 1\n"),
                   Catch::StartsWith("config error: iccs.toml:2: unknown key [cluster] frobnicate (keys of [cluster] "
                                     "are compute_threads, proxies, proxy_cores, polling,"));
        CHECK(error_of("clusters = 2\n") ==
              "config error: iccs.toml:1: key clusters outside any section (did you mean [machine] clusters?)");
    }
    SECTION("unknown section") {
        CHECK(error_of("[clustr]\npolling = \"busy\"\n") ==
              "config error: iccs.toml:1: unknown section [clustr] (did you mean [cluster]?)");
        CHECK(error_of("[machine]\nclusters = 2\n[network]\nmtu = 1500\n") ==
              "config error: iccs.toml:3: unknown section [network] (sections are [machine], [cluster], [slidwin], "
              "[reassembly], [convergence], [test], [wan], [runtime], [security], [group])");
        CHECK_THAT(error_of("[[cluster]]\ncompute_threads = 2\n"),
                   Catch::Contains("[[cluster]]: [cluster] is a single section, not an array"));
    }
    SECTION("bad IPv4 address") {
        const std::string allowed =
            ": expected an IPv4 unicast address like \"10.0.0.0\" (not 0.x.x.x, 127.x.x.x, or 224.0.0.0 and above)";
        CHECK(error_of("[machine]\nbase_ip = \"10.0.300.0\"\n") ==
              "config error: iccs.toml:2: [machine] base_ip = \"10.0.300.0\"" + allowed);
        for (const char* bad :
             {"10.0.0", "10.0.0.0.0", "010.0.0.0", "10.0.0.x", "224.0.0.0", "127.0.0.0", "0.0.0.0", " 10.0.0.0"}) {
            INFO(bad);
            CHECK_THAT(error_of(std::string("[machine]\nbase_ip = \"") + bad + "\"\n"), Catch::EndsWith(allowed));
        }
        CHECK(error_of("[machine]\nbase_ip = \"192.168.7.0\"\n").empty());
    }
    SECTION("proxy_cores entry beyond the host's cores") {
        const uint32_t n = host_core_count();
        CHECK(error_of("[cluster]\nproxy_cores = [0,\n  " + std::to_string(n) + "]\n") ==
              "config error: iccs.toml:3: [cluster] proxy_cores[1] = " + std::to_string(n) +
                  ": expected a core number from 0 to " + std::to_string(n - 1) + " (this host has " +
                  std::to_string(n) + (n == 1 ? " core)" : " cores)"));
        CHECK_THAT(error_of("[cluster]\nproxy_cores = [-1]\n"),
                   Catch::Contains("[cluster] proxy_cores[0] = -1: expected"));
        CHECK_THAT(error_of("[cluster]\nproxy_cores = [\"1\"]\n"),
                   Catch::Contains("[cluster] proxy_cores[0] = \"1\": expected"));
    }
    SECTION("powers of two") {
        CHECK(error_of("[cluster]\nring_entries = 1000\n") ==
              "config error: iccs.toml:2: [cluster] ring_entries = 1000: expected a power of two from 64 to 65536");
        CHECK(error_of("[slidwin]\nrcv_buf_datagrams = 65536\n") ==
              "config error: iccs.toml:2: [slidwin] rcv_buf_datagrams = 65536: expected a power of two from 16 to "
              "32768");
        CHECK(error_of("[cluster]\nring_entries = 4096\n").empty());
    }
    SECTION("parse error, with line and column") {
        const std::string e = error_of("[machine]\nclusters = 2\nfabric = memif\n");
        CHECK_THAT(e, Catch::StartsWith("config error: iccs.toml:3:"));
        CHECK(e.find('\n') == std::string::npos);
        CHECK_THAT(error_of("[machine]\nclusters = 2\nclusters = 3\n"),
                   Catch::StartsWith("config error: iccs.toml:3:"));
        CHECK_THAT(error_of("[machine]\nfabric = memif\n"),
                   Catch::EndsWith("(text values need quotes, e.g. polling = \"busy\")"));
    }
    SECTION("every wrong key in a file is reported, in file order") {
        CHECK(error_of("[cluster]\npolling = \"fast\"\n[machine]\nclusters = 0\n") ==
              "config error: iccs.toml:2: [cluster] polling = \"fast\": allowed values are busy, adaptive, inline\n"
              "config error: iccs.toml:4: [machine] clusters = 0: expected an integer from 1 to 64");
    }
    SECTION("rules between keys") {
        check_rules_between_keys();
    }
    SECTION("fabric udp: socket addresses and ports") {
        check_udp_addresses_and_ports();
    }
    SECTION("a config built in code is held to the same rules") {
        MachineConfig c;
        c.cluster.ring_entries = 100;
        CHECK(validate(c) == "config error: [cluster] ring_entries = 100: expected a power of two from 64 to 65536");
        c = MachineConfig{};
        c.cluster.compute_threads = 9;
        CHECK_THAT(*validate(c), Catch::Contains("call resolve()"));
        resolve(c);
        CHECK(c.cluster.proxies_resolved == 3);
        CHECK(!validate(c));
    }
}

TEST_CASE("config: a missing file is an error naming the path", "[config]") {
    const ConfigResult r = load_config_file("/nonexistent/iccs.toml");
    REQUIRE(!r.ok());
    CHECK_THAT(r.error, Catch::StartsWith("config error: cannot read /nonexistent/iccs.toml: "));
    CHECK(configure("/nonexistent/iccs.toml").error == r.error);
}

TEST_CASE("config: command-line overrides", "[config]") {
    MachineConfig c;
    SECTION("valid values, through the file's checks") {
        CHECK(!apply_override(c, "cluster.polling", "busy"));
        CHECK(!apply_override(c, "machine.clusters", "3"));
        CHECK(!apply_override(c, "machine.fabric", "\"udp\""));  // (af_packet with mtu 9000: refused by validate)
        CHECK(!apply_override(c, "cluster.compute_threads", "9"));
        CHECK(c.cluster.proxies_resolved == 3);  // auto follows compute_threads
        CHECK(!apply_override(c, "cluster.proxies", "4"));
        CHECK(c.cluster.proxies_resolved == 4);
        CHECK(!apply_override(c, "cluster.proxies", "auto"));
        CHECK(c.cluster.proxies_resolved == 3);
        CHECK(!apply_override(c, "mtu_bytes", "9000"));  // a bare key: the one section that has it
        CHECK(!apply_override(c, "cluster.proxy_cores", "0,1"));
        CHECK(!apply_override(c, "cluster.proxy_cores", "[1]"));
        CHECK(!apply_override(c, "test.drop", "0.25"));
        CHECK(!apply_override(c, "test.duplicate", "1"));
        CHECK(!apply_override(c, "machine.base_ip", "192.168.0.0"));
        CHECK(c.cluster.polling == Polling::kBusy);
        CHECK(c.machine.clusters == 3);
        CHECK(c.machine.fabric == Fabric::kUdp);
        CHECK(c.machine.mtu_bytes == 9000);
        CHECK(c.cluster.proxy_cores == std::vector<uint32_t>{1});
        CHECK(c.test.drop == 0.25);
        CHECK(c.test.duplicate == 1.0);
        CHECK(!validate(c));
        CHECK(!apply_override(c, "cluster.proxy_cores", ""));
        CHECK(c.cluster.proxy_cores.empty());
    }
    SECTION("invalid values name the flag's key and leave the config as it was") {
        const MachineConfig before = c;
        CHECK(apply_override(c, "cluster.polling", "fast") ==
              "config error: command line: [cluster] polling = \"fast\": allowed values are busy, adaptive, inline");
        CHECK(apply_override(c, "machine.clusters", "two") ==
              "config error: command line: [machine] clusters = \"two\": expected an integer from 1 to 64");
        CHECK(apply_override(c, "machine.clusters", "65", "--clusters") ==
              "config error: --clusters: [machine] clusters = 65: expected an integer from 1 to 64");
        CHECK(apply_override(c, "cluster.proxies", "0") ==
              "config error: command line: [cluster] proxies = 0: expected an integer from 1 to 64, or \"auto\"");
        CHECK_THAT(*apply_override(c, "cluster.proxy_cores", "0,4096"),
                   Catch::StartsWith("config error: command line: [cluster] proxy_cores[1] = 4096: expected a core "));
        CHECK(apply_override(c, "test.drop", "often") ==
              "config error: command line: [test] drop = \"often\": expected a probability from 0.0 to 1.0");
        CHECK(apply_override(c, "cluster.pollin", "busy") ==
              "config error: command line: unknown key [cluster] pollin (did you mean polling?)");
        CHECK(apply_override(c, "clustr.polling", "busy") ==
              "config error: command line: unknown section [clustr] (did you mean [cluster]?)");
        CHECK(apply_override(c, "pollin", "busy") ==
              "config error: command line: unknown key pollin (did you mean cluster.polling?)");
        CHECK(c == before);
    }
}

TEST_CASE("config: configure() applies the file, then the flags, then validates once", "[config]") {
    const std::string path = "/tmp/iccs_test_config_" + std::to_string(::getpid()) + ".toml";
    {
        std::ofstream out(path);
        out << "[machine]\nfabric = \"pci\"\npci_addresses = [\"03:00.0\", \"03:00.1\", \"03:00.2\"]\n"
               "[cluster]\nproxies = 2\npolling = \"busy\"\n";
    }
    // The file alone is inconsistent (3 ports for 2 proxies); the flag makes it right.
    CHECK_THAT(load_config_file(path).error, Catch::Contains("needs [machine] pci_addresses with 2 entries"));
    const ConfigResult r = configure(path, {{"cluster.proxies", "3"}, {"cluster.polling", "adaptive"}});
    INFO(r.error);
    REQUIRE(r.ok());
    CHECK(r.config->cluster.proxies_resolved == 3);
    CHECK(r.config->cluster.polling == Polling::kAdaptive);
    CHECK_THAT(configure(path, {{"cluster.proxies", "4"}}).error, Catch::Contains("it has 3"));
    CHECK(configure(path, {{"cluster.polling", "fast"}}).error ==
          "config error: command line: [cluster] polling = \"fast\": allowed values are busy, adaptive, inline");
    std::remove(path.c_str());
}

TEST_CASE("config: dump_config lists every key and round-trips", "[config]") {
    const MachineConfig defaults;
    const std::string d = dump_config(defaults);
    CHECK(keys_in(d) == table_keys());
    CHECK_THAT(d, Catch::Contains("proxies = \"auto\"  # = 2\n"));
    CHECK_THAT(d, Catch::Contains("proxy_cores = []  # empty: spread over the host's cores\n"));
    CHECK(*load_config(d, "dump").config == defaults);

    // Every key away from its default, set the way the command line sets it.
    const std::vector<std::pair<std::string, std::string>> flags = {
        {"machine.clusters", "5"},
        {"machine.fabric", "pci"},
        {"machine.mtu_bytes", "9000"},
        {"machine.base_ip", "172.16.4.0"},
        {"machine.udp_port", "12345"},
        {"machine.udp_addresses", "10.1.0.1,10.1.0.2,10.1.0.3,10.1.0.4,10.1.0.5"},
        {"machine.udp_sqpoll", "true"},
        {"machine.memif_zero_copy", "true"},
        {"machine.udp_checksum", "off-on-memif"},
        {"machine.pci_addresses", "0000:03:00.0,0000:03:00.1,0000:04:00.0"},
        {"machine.pcap_dir", "/tmp/iccs capture"},
        {"machine.pcap_max_bytes", "1048576"},
        {"cluster.compute_threads", "7"},
        {"cluster.proxy_cores", host_core_count() >= 2 ? "1,0,1" : "0,0"},
        {"cluster.polling", "inline"},
        {"cluster.dispatch", "least-loaded"},
        {"cluster.ring_entries", "256"},
        {"cluster.mempool_mbufs", "65535"},
        {"slidwin.snd_buf_datagrams", "64"},
        {"slidwin.rcv_buf_datagrams", "128"},
        {"slidwin.rto_initial_us", "20000"},
        {"slidwin.rto_min_us", "2000"},
        {"slidwin.rto_max_us", "3000000"},
        {"slidwin.delack_us", "0"},
        {"slidwin.persist_us", "5000"},
        {"slidwin.ack_every", "4"},
        {"reassembly.max_datagrams", "8"},
        {"reassembly.max_bytes", "100000"},
        {"reassembly.timeout_ms", "250"},
        {"test.drop", "0.1"},
        {"test.duplicate", "1e-3"},
        {"test.reorder_window", "16"},
        {"test.seed", "9223372036854775807"},
        {"test.slow_proxy", "1"},
        {"test.slow_proxy_us", "250"},
        {"cluster.peer_timeout_ms", "2500"},
        {"cluster.combine_max_bytes", "512"},
        {"cluster.assist", "false"},
        {"convergence.order", "unordered"},
        {"convergence.window_bytes", "65536"},
        {"convergence.window_msgs", "256"},
        {"convergence.stripe_threshold_bytes", "8000"},
        {"convergence.accept_backlog", "8"},
        {"convergence.connect_timeout_ms", "1500"},
        {"wan.sites", "0,0,1,1,2"},
        {"wan.latency_ms", "12.5"},
        {"wan.bandwidth_bytes_per_s", "1000000"},
        {"wan.loss", "0.02"},
        {"wan.links", "0<->1 1e5 100; 1->2 cut"},
        {"wan.script", "/tmp/links.wan"},
        {"wan.series", ""},
        {"wan.hold_limit_bytes", "1048576"},
        {"runtime.transport", "delay"},
        {"runtime.delay_us", "36"},
        {"security.key_file", "/etc/iccs/key"},
        {"security.encrypt", "true"},
        {"group.family", "flat"},
        {"group.segment_bytes", "4096"},
    };
    std::set<std::pair<std::string, std::string>> flagged;
    MachineConfig c;
    for (const auto& [key, value] : flags) {
        INFO(key << " = " << value);
        REQUIRE(!apply_override(c, key, value));
        flagged.insert({key.substr(0, key.find('.')), key.substr(key.find('.') + 1)});
    }
    flagged.insert({"cluster", "proxies"});  // stays "auto", set below
    CHECK(flagged == table_keys());
    INFO(validate(c).value_or(""));
    REQUIRE(!validate(c));
    CHECK(c.cluster.proxies_resolved == 3);
    const std::string text = dump_config(c);
    CHECK_THAT(text, Catch::Contains("proxies = \"auto\"  # = 3\n"));
    CHECK_THAT(text, Catch::Contains("base_ip = \"172.16.4.0\"  # proxies 172.16.4.1 .. 172.16.8.3\n"));
    const ConfigResult back = load_config(text, "dump");
    INFO(text << back.error);
    REQUIRE(back.ok());
    CHECK(*back.config == c);
    CHECK(!(*back.config == defaults));

    CHECK(!apply_override(c, "cluster.proxies", "2"));
    CHECK(!apply_override(c, "machine.pcap_dir", ""));  // capture is for the DPDK fabrics
    CHECK(!apply_override(c, "machine.fabric", "udp"));
    const std::string fixed = dump_config(c);
    CHECK_THAT(fixed, Catch::Contains("proxies = 2\n"));
    CHECK_THAT(fixed, Catch::Contains("  # ignored: fabric is not \"pci\"\n"));
    CHECK_THAT(fixed, Catch::Contains("udp_checksum = \"off-on-memif\"  # ignored: fabric is not \"memif\" "
                                      "(checksums stay on)\n"));
    CHECK_THAT(fixed, Catch::Contains("udp_addresses = [\"10.1.0.1\", \"10.1.0.2\", \"10.1.0.3\", \"10.1.0.4\", "
                                      "\"10.1.0.5\"]  # ports 12345 .. 12602\n"));
    REQUIRE(load_config(fixed, "dump").ok());
    CHECK(*load_config(fixed, "dump").config == c);
}

TEST_CASE("config: sections become the stack's configs", "[config]") {
    MachineConfig c;
    c.slidwin.rto_min_us = 2000;
    c.slidwin.delack_us = 7;
    c.reassembly.timeout_ms = 250;
    const SlidwinConfig s = to_slidwin_config(c.slidwin);
    CHECK(s.rto_min_ns == 2'000'000);
    CHECK(s.delack_ns == 7'000);
    CHECK(s.rto_initial_ns == SlidwinConfig{}.rto_initial_ns);
    CHECK(to_reassembly_config(c.reassembly).timeout_ns == 250'000'000);
    CHECK(to_reassembly_config(ReassemblySection{}).max_bytes == ReassemblyConfig{}.max_bytes);
    CHECK(to_string(Dispatch::kRoundRobin) == "round-robin");
    CHECK(to_string(Fabric::kAfPacket) == "af_packet");
    CHECK(to_string(Polling::kInline) == "inline");
}

TEST_CASE("config: pcap_dir and pcap_max_bytes", "[config]") {
    const ConfigResult r = load_config("[machine]\npcap_dir = \"cap\"\npcap_max_bytes = 1000000\n", "iccs.toml");
    INFO(r.error);
    REQUIRE(r.ok());
    CHECK(r.config->machine.pcap_dir == "cap");
    CHECK(r.config->machine.pcap_max_bytes == 1000000);
    CHECK(MachineConfig{}.machine.pcap_dir.empty());  // off by default
    CHECK(MachineConfig{}.machine.pcap_max_bytes == 64ull << 20);
    CHECK(error_of("[machine]\npcap_dir = 3\n") ==
          "config error: iccs.toml:2: [machine] pcap_dir = 3: expected a directory path (a string; \"\" = off)");
    CHECK(error_of("[machine]\npcap_max_bytes = 100\n") ==
          "config error: iccs.toml:2: [machine] pcap_max_bytes = 100: expected an integer from 65536 to "
          "1099511627776");
    CHECK_THAT(error_of("[machine]\nfabric = \"udp\"\npcap_dir = \"cap\"\n"),
               Catch::Contains("[machine] pcap_dir = \"cap\" with fabric = \"udp\": capture records the frames of "
                               "DPDK ports"));
    MachineConfig c;
    REQUIRE(!apply_override(c, "pcap_dir", "/tmp/x", "--pcap"));
    CHECK(c.machine.pcap_dir == "/tmp/x");
}

TEST_CASE("config: fabric af_packet refuses an MTU its kernel ring's frames cannot hold", "[config]") {
    // A run of `--fabric af_packet --mtu 9000` hung: every packet over 1968 bytes arrived cut short.
    CHECK(error_of("[machine]\nfabric = \"af_packet\"\nmtu_bytes = 9000\n") ==
          "config error: [machine] mtu_bytes = 9000 (--mtu) with fabric = \"af_packet\": the kernel ring's frames "
          "hold IP packets of at most 1968 bytes; use mtu_bytes <= 1968, or fabric memif or udp for larger packets");
    CHECK(!error_of("[machine]\nfabric = \"af_packet\"\nmtu_bytes = 1969\n").empty());
    const ConfigResult r = load_config("[machine]\nfabric = \"af_packet\"\nmtu_bytes = 1968\n", "iccs.toml");
    INFO(r.error);
    CHECK(r.ok());
    CHECK(error_of("[machine]\nfabric = \"memif\"\nmtu_bytes = 9000\n").empty());
    MachineConfig c;  // the flags: --fabric af_packet --mtu 9000
    REQUIRE(!apply_override(c, "fabric", "af_packet", "--fabric"));
    REQUIRE(!apply_override(c, "mtu_bytes", "9000", "--mtu"));
    const auto e = validate(c);
    REQUIRE(e.has_value());
    CHECK_THAT(*e, Catch::Contains("mtu_bytes = 9000 (--mtu) with fabric = \"af_packet\""));
}

TEST_CASE("config: [wan] keys, their errors, and the emulator's setup", "[config]") {
    CHECK(error_of("[wan]\nsites = [0, 0, 1]\n") ==
          "config error: [wan] sites has 3 entries: need one per cluster (2, [machine] clusters) or none (every "
          "cluster its own site)");
    CHECK(error_of("[wan]\nsites = [0, 64]\n") ==
          "config error: iccs.toml:2: [wan] sites[1] = 64: expected a site id from 0 to 63");
    CHECK(error_of("[wan]\nlatency_ms = -1\n") ==
          "config error: iccs.toml:2: [wan] latency_ms = -1: expected a number of milliseconds from 0 to 100000");
    CHECK(error_of("[wan]\nbandwidth_bytes_per_s = 1.5\n") ==
          "config error: iccs.toml:2: [wan] bandwidth_bytes_per_s = 1.5: expected an integer from 0 to 1000000000000");
    CHECK_THAT(error_of("[wan]\nlinks = [\"0-1 100 1\"]\n"),
               Catch::StartsWith("config error: iccs.toml:2: [wan] links[0] = \"0-1 100 1\": expected \"A->B BW LAT_MS [LOSS]\""));
    CHECK_THAT(error_of("[wan]\nlinks = [\"0->0 100 1\"]\n"), Catch::Contains("links[0] = \"0->0 100 1\": expected"));
    CHECK_THAT(error_of("[wan]\nlinks = [\"0->1 100\"]\n"), Catch::Contains("links[0] = \"0->1 100\": expected"));
    CHECK(error_of("[wan]\nlinks = [\"0->5 100 1\"]\n") ==
          "config error: [wan] links[0] = \"0->5 100 1\": site 5 has no cluster (sites of the clusters: the cluster "
          "ids 0..1)");
    CHECK(error_of("[wan]\nscript = \"a.wan\"\nseries = \"b.txt\"\n") ==
          "config error: [wan] script = \"a.wan\" and series = \"b.txt\": choose one (both drive the same links)");
    CHECK(error_of("[wan]\nlinks = [\"0<->1 1e6 10\", \"1->0 cut\"]\nlatency_ms = 2.5\n").empty());

    MachineConfig c;
    std::shared_ptr<const WanConfig> w;
    std::string err;
    REQUIRE(to_wan_config(c, w, err));
    CHECK(w == nullptr);  // defaults: the stage is off
    REQUIRE(!apply_override(c, "machine.clusters", "3"));
    REQUIRE(!apply_override(c, "wan.sites", "0,0,1"));
    REQUIRE(!apply_override(c, "wan.latency_ms", "10"));
    REQUIRE(!apply_override(c, "wan.links", "0->1 1000 1"));
    REQUIRE(!validate(c));
    REQUIRE(to_wan_config(c, w, err));
    REQUIRE(w != nullptr);
    CHECK(w->site_of_cluster == std::vector<uint16_t>{0, 0, 1});
    CHECK(w->topo.sites == 2);
    CHECK(w->topo.at(0, 1) == WanLinkParams{1000, 1'000'000, true});
    CHECK(w->topo.at(1, 0) == WanLinkParams{0, 10'000'000, true});
    REQUIRE(!apply_override(c, "wan.links", "0->1 cut"));
    CHECK(!to_wan_config(c, w, err));
    CHECK(err == "config error: [wan] links: site 1 cannot be reached from site 0 (every link towards it is cut)");
    REQUIRE(!apply_override(c, "wan.links", ""));
    REQUIRE(!apply_override(c, "wan.script", "/nonexistent/s.wan"));
    CHECK(!to_wan_config(c, w, err));
    CHECK_THAT(err, Catch::StartsWith("wan script error: cannot read /nonexistent/s.wan: "));

    // loss: [wan] loss for every link, a trailing LOSS per links entry; errors name the value
    CHECK(error_of("[wan]\nloss = 1.5\n") ==
          "config error: iccs.toml:2: [wan] loss = 1.5: expected a probability from 0.0 to 1.0");
    CHECK_THAT(error_of("[wan]\nlinks = [\"0->1 100 1 2\"]\n"), Catch::Contains("links[0] = \"0->1 100 1 2\": expected"));
    CHECK_THAT(error_of("[wan]\nlinks = [\"0->1 100 1 0.1 5\"]\n"), Catch::Contains("LOSS: 0..1"));
    MachineConfig l;
    REQUIRE(!apply_override(l, "wan.loss", "0.01"));
    REQUIRE(!apply_override(l, "wan.links", "0->1 1000 1 0.2"));
    REQUIRE(!validate(l));
    REQUIRE(to_wan_config(l, w, err));
    REQUIRE(w != nullptr);  // loss alone turns the stage on
    CHECK(w->topo.at(0, 1) == WanLinkParams{1000, 1'000'000, true, 0.2});
    CHECK(w->topo.at(1, 0) == WanLinkParams{0, 0, true, 0.01});
}

TEST_CASE("config: udp_checksum = off-on-memif reaches the stacks on memif only", "[config]") {
    // [machine] udp_checksum (issue 35): the plan's udp_checksum_off (the proxies' StackConfig)
    // is on for fabric memif alone; "on" (the default) or any other fabric keeps the sums.
    for (const auto& [fabric, setting, off] :
         std::vector<std::tuple<std::string, std::string, bool>>{{"memif", "off-on-memif", true},
                                                                 {"memif", "on", false},
                                                                 {"udp", "off-on-memif", false},
                                                                 {"af_packet", "off-on-memif", false}}) {
        INFO(fabric << " " << setting);
        MachineConfig c;
        REQUIRE(!apply_override(c, "machine.fabric", fabric));
        REQUIRE(!apply_override(c, "machine.udp_checksum", setting));
        ClusterPlan plan;
        std::string err;
        REQUIRE(plan_from_config(c, 0, plan, err));
        CHECK(plan.udp_checksum_off == off);
    }
    MachineConfig c;
    CHECK(c.machine.udp_checksum == UdpChecksum::kOn);
    CHECK(apply_override(c, "machine.udp_checksum", "off"));  // only the two values
}

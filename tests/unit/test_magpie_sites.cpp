// Where the ranks of an MPI job are for libiccs-magpie (mpi/magpie/sites.hpp): ICCS_SITES, the
// machine file's placement and host names.
#include <catch2/catch.hpp>

#include "sites.hpp"

using namespace iccs::magpie;

TEST_CASE("magpie sites: a shape SxCxR places ranks in blocks", "[magpie]") {
    std::vector<Place> p;
    std::string err;
    REQUIRE(parse_sites("2x2x2", 8, {}, p, err));
    REQUIRE(p.size() == 8);
    CHECK(p[0] == Place{0, 0});
    CHECK(p[1] == Place{0, 0});
    CHECK(p[2] == Place{0, 1});
    CHECK(p[3] == Place{0, 1});
    CHECK(p[4] == Place{1, 2});
    CHECK(p[7] == Place{1, 3});
    CHECK(describe(p) == "2 sites, 4 clusters, 8 ranks");
    CHECK_FALSE(parse_sites("2x2x2", 6, {}, p, err));
    CHECK(err == "ICCS_SITES=\"2x2x2\" places 8 ranks but MPI_COMM_WORLD has 6");
    CHECK_FALSE(parse_sites("2x0x2", 0, {}, p, err));
    CHECK(err.find("three whole numbers 1..65536") != std::string::npos);
    CHECK_FALSE(parse_sites("2x2", 4, {}, p, err));
}

TEST_CASE("magpie sites: one entry per rank, SITE:CLUSTER or SITE (cluster = the host)", "[magpie]") {
    std::vector<Place> p;
    std::string err;
    REQUIRE(parse_sites("0:0, 1:1 0:0,1:1", 4, {}, p, err));
    CHECK(p == std::vector<Place>{{0, 0}, {1, 1}, {0, 0}, {1, 1}});
    // No cluster given: ranks of one site on one host share a cluster; other sites, other clusters.
    REQUIRE(parse_sites("0,0,1,1", 4, {7, 7, 7, 8}, p, err));
    CHECK(p[0].cluster == p[1].cluster);
    CHECK(p[1].cluster != p[2].cluster);  // same host, another site
    CHECK(p[2].cluster != p[3].cluster);  // same site, another host
    // A given cluster id is kept; host clusters are numbered after it.
    REQUIRE(parse_sites("0:5,0", 2, {0, 0}, p, err));
    CHECK(p[0].cluster == 5);
    CHECK(p[1].cluster == 6);
    CHECK_FALSE(parse_sites("0,0", 2, {}, p, err));
    CHECK(err.find("names no cluster") != std::string::npos);
    CHECK_FALSE(parse_sites("0:0,1", 3, {0, 0, 0}, p, err));
    CHECK(err.find("has 2 entries but MPI_COMM_WORLD has 3 ranks") != std::string::npos);
    CHECK_FALSE(parse_sites("0:0,a:1", 2, {}, p, err));
    CHECK(err == "ICCS_SITES entry 1 \"a:1\": expected SITE:CLUSTER or SITE (whole numbers)");
    // A cluster is one multiprocessor: not in two sites.
    CHECK_FALSE(parse_sites("0:3,1:3", 2, {}, p, err));
    CHECK(err == "ICCS_SITES: cluster 3 is in site 0 (rank 0) and in site 1 (rank 1): a cluster belongs to one site");
}

TEST_CASE("magpie sites: the machine file places rank r in cluster r / compute_threads", "[magpie]") {
    std::vector<Place> p;
    std::string err;
    REQUIRE(places_from_machine(4, 2, {0, 0, 1, 1}, 8, p, err));
    CHECK(p[3] == Place{0, 1});
    CHECK(p[4] == Place{1, 2});
    REQUIRE(places_from_machine(3, 1, {}, 3, p, err));  // [wan] sites = []: every cluster its own site
    CHECK(p == std::vector<Place>{{0, 0}, {1, 1}, {2, 2}});
    CHECK_FALSE(places_from_machine(2, 2, {}, 5, p, err));
    CHECK(err.find("2 clusters x 2 compute threads") != std::string::npos);
    CHECK(err.find("MPI_COMM_WORLD has 5") != std::string::npos);
}

TEST_CASE("magpie sites: host names give a cluster per host and a site per domain", "[magpie]") {
    CHECK(site_of_host("node3.vu.das") == "vu.das");
    CHECK(site_of_host("node3") == "");
    const auto p = places_from_hosts({"a.vu.das", "a.vu.das", "b.vu.das", "c.uva.das", "lone"});
    CHECK(p[0] == p[1]);
    CHECK(p[0].site == p[2].site);
    CHECK(p[0].cluster != p[2].cluster);
    CHECK(p[3].site != p[0].site);
    CHECK(p[4].site != p[0].site);
    CHECK(describe(p) == "3 sites, 4 clusters, 5 ranks");
}

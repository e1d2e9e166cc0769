// test_doorbell.cpp: the wake protocol of adaptive polling's assist (proxy/doorbell.hpp,
// proxy/rings.hpp Waker): a doorbell is rung only for a sleeping proxy that no compute thread
// watches, and the last watcher to leave a sleeping proxy is told to poll it itself.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "doorbell.hpp"
#include "rings.hpp"

using namespace iccs;

namespace {
std::string temp_bell() {
    char path[] = "/tmp/iccs-test-bell-XXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    return path;
}
}  // namespace

TEST_CASE("a doorbell rings a sleeping proxy only while nobody watches it", "[doorbell]") {
    const std::string path = temp_bell();
    std::string err;
    auto mine = Doorbell::open(path, err);  // the sleeping proxy's side
    auto peer = Doorbell::open(path, err);  // the sending proxy's side (another process)
    REQUIRE(mine != nullptr);
    REQUIRE(peer != nullptr);
    Waker w;
    w.share(mine->word(), mine->watch());

    peer->ring();  // awake: nothing to do
    CHECK(peer->rings() == 0);
    CHECK_FALSE(w.sleeping());

    w.prepare_sleep();
    CHECK(w.sleeping());
    w.watch_enter();  // a compute thread polls the proxy itself
    w.watch_enter();  // and a second one
    CHECK(w.watchers() == 2);
    peer->ring();     // skipped: the watchers take the frame
    CHECK(peer->rings() == 0);
    CHECK(w.sleeping());
    CHECK_FALSE(w.watch_leave());  // another still watches: no poll needed
    peer->ring();
    CHECK(peer->rings() == 0);
    CHECK(w.watch_leave());  // the last one leaves a sleeping proxy: it must poll once itself
    CHECK(w.watchers() == 0);
    peer->ring();  // unwatched: the ring wakes the proxy, and says so in its word
    CHECK(peer->rings() == 1);
    CHECK_FALSE(w.sleeping());
    peer->ring();  // woken already: no second wake
    CHECK(peer->rings() == 1);

    w.watch_enter();  // leaving an awake proxy: it polls by itself
    CHECK_FALSE(w.watch_leave());
    unlink(path.c_str());
}

TEST_CASE("a waker without a doorbell counts its watchers on its own", "[doorbell]") {
    Waker w;  // af_packet, udp: no doorbell file
    w.watch_enter();
    CHECK(w.watchers() == 1);
    w.prepare_sleep();
    CHECK(w.watch_leave());
    w.cancel_sleep();
    CHECK_FALSE(w.sleeping());
}

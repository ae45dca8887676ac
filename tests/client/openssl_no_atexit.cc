// Keeps OpenSSL from freeing its global state from an atexit handler in a
// test binary that makes TLS channels. gRPC's threads may still be
// reconnecting, mid-handshake, when the process exits: CI once saw ASan
// report a double free inside OPENSSL_cleanup at the exit of
// client_auth_test, after its tests had passed (not reproduced in 230 runs
// since). The state is left for the OS to reclaim, as for any other global.
//
// Compiled into the test binary itself: from a static library, an object
// that nothing references would be left out by the linker.
#include <openssl/crypto.h>

namespace {

// Before main: before gRPC first initializes OpenSSL.
[[maybe_unused]] const bool kNoAtExit =
    OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr) == 1;

}  // namespace

#include "zk/c_client.h"

#include <cstdio>
#include <mutex>

#include <spdlog/spdlog.h>

#include "statemachine/result.h"

namespace dugong::zk::detail {

namespace {

const char* rcName(int rc) {
  switch (rc) {
    case ZOK: return "ZOK";
    case ZSYSTEMERROR: return "ZSYSTEMERROR";
    case ZRUNTIMEINCONSISTENCY: return "ZRUNTIMEINCONSISTENCY";
    case ZDATAINCONSISTENCY: return "ZDATAINCONSISTENCY";
    case ZCONNECTIONLOSS: return "ZCONNECTIONLOSS";
    case ZMARSHALLINGERROR: return "ZMARSHALLINGERROR";
    case ZUNIMPLEMENTED: return "ZUNIMPLEMENTED";
    case ZOPERATIONTIMEOUT: return "ZOPERATIONTIMEOUT";
    case ZBADARGUMENTS: return "ZBADARGUMENTS";
    case ZINVALIDSTATE: return "ZINVALIDSTATE";
    case ZNONODE: return "ZNONODE";
    case ZNOAUTH: return "ZNOAUTH";
    case ZBADVERSION: return "ZBADVERSION";
    case ZNOCHILDRENFOREPHEMERALS: return "ZNOCHILDRENFOREPHEMERALS";
    case ZNODEEXISTS: return "ZNODEEXISTS";
    case ZNOTEMPTY: return "ZNOTEMPTY";
    case ZSESSIONEXPIRED: return "ZSESSIONEXPIRED";
    case ZINVALIDCALLBACK: return "ZINVALIDCALLBACK";
    case ZINVALIDACL: return "ZINVALIDACL";
    case ZAUTHFAILED: return "ZAUTHFAILED";
    case ZCLOSING: return "ZCLOSING";
    case ZNOTHING: return "ZNOTHING";
    case ZSESSIONMOVED: return "ZSESSIONMOVED";
    default: return "?";
  }
}

// Nodes are readable by anyone; only the creator's authenticated identities may
// change them. Both entries point into the C library's constants.
ACL kAuthAcl[] = {
    {ZOO_PERM_ALL, {const_cast<char*>("auth"), const_cast<char*>("")}},
    {ZOO_PERM_READ, {const_cast<char*>("world"), const_cast<char*>("anyone")}},
};
ACL_vector kAuthAclVector = {2, kAuthAcl};

}  // namespace

std::string describeRc(int rc) { return std::string(zerror(rc)) + " (" + rcName(rc) + ")"; }

std::string sessionIdText(int64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(id));
  return buf;
}

bool outcomeUnknown(int rc) {
  return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONEXPIRED || rc == ZCLOSING ||
         rc == ZSESSIONMOVED || rc == ZINVALIDSTATE;
}

const ACL_vector* aclFor(const ZkOptions& options) {
  return options.auth ? &kAuthAclVector : &ZOO_OPEN_ACL_UNSAFE;
}

void clientLogLine(const char* message) { spdlog::debug("zk-client: {}", message); }

void installClientLogging() {
  static std::once_flag once;
  std::call_once(once, [] { zoo_set_debug_level(ZOO_LOG_LEVEL_WARN); });
}

}  // namespace dugong::zk::detail

#if defined(__has_feature)  // clang
#if __has_feature(address_sanitizer)
#define DUGONG_ZK_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(DUGONG_ZK_ASAN)  // gcc, clang
// LeakSanitizer's built-in suppressions for the binaries linking this library: the C
// client frees a handle with the completions it queued as the handle closed still in
// that queue (its completion thread has ended; ZOOKEEPER-2894, ZOOKEEPER-3868). The
// session frees what its own requests carry (zk/session_impl.h, OutstandingCalls);
// these are the C client's own allocations for them, named by the functions that make
// them, so that a leak of dugong's is still reported.
extern "C" const char* __lsan_default_suppressions() {  // NOLINT(bugprone-reserved-identifier)
  return "leak:add_completion\n"
         "leak:queue_session_event\n"
         "leak:free_completions\n"
         "leak:create_buffer_oarchive\n"
         "leak:create_completion_entry\n"
         "leak:clone_watcher_object\n"
         "leak:collectWatchers\n"
         "leak:activateWatcher\n"
         "leak:create_watcher_registration\n"
         "leak:zoo_awget\n"
         "leak:zoo_awexists\n"
         "leak:zoo_awget_children\n"
         "leak:zookeeper_process\n";
}
#endif

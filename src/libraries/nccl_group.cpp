// NCCL groups (nccl::group in nccl_communicator.hpp): ncclGroupStart / ncclGroupEnd, and
// at the end the waits and watches of what the group issued.
#include <vector>

#include "libraries/nccl_comm_state.hpp"

namespace cudakit::nccl::detail {

thread_local constinit int open_group_depth = 0;

namespace {

struct OpenGroup {
  std::vector<GroupCall> calls;
  // Every communicator the group touched stays locked until its end (Note [NCCL calls and
  // the watchdog]): NCCL launches their work only then.
  std::vector<std::unique_lock<CallLock>> locks;
};
thread_local OpenGroup open_group;

const char* const group_end_call = "ncclGroupEnd";

// After ncclGroupEnd: NCCL's progress of every communicator in it, the communicators it
// made, then the watches of the streams it used.
void finish(std::vector<GroupCall>& calls) {
  std::vector<std::shared_ptr<CommState>> created;
  for (auto& c : calls) {
    if (c.creating) {
      created.push_back(c.state);
      continue;
    }
    std::lock_guard lock(c.state->call_lock);
    c.state->throw_if_ended();
    c.state->wait_for_progress(group_end_call, deadline_after(c.state->options));
  }
  if (!created.empty()) finish_creation(created, "ncclCommSplit");
  for (auto& c : calls)
    if (c.stream && c.state->needs_watch()) c.state->watch(c.stream);
}

}  // namespace

void note_in_group(GroupCall call) {
  OpenGroup& g = open_group;
  if (!call.creating) {
    bool locked = false;
    for (auto& l : g.locks) locked |= l.mutex() == &call.state->call_lock;
    if (!locked) g.locks.emplace_back(call.state->call_lock);
  }
  g.calls.push_back(std::move(call));
}

void group_begin() {
  ncclResult_t r = raw::api().GroupStart();
  if (r != ncclSuccess)
    throw NcclError(r, "ncclGroupStart", -1, 0, -1, "", "ncclGroupStart: " + result_name(r));
  ++open_group_depth;
}

void group_end() {
  OpenGroup& g = open_group;
  ncclResult_t r = raw::api().GroupEnd();
  if (--open_group_depth > 0) {
    if (r != ncclSuccess && r != ncclInProgress)
      throw NcclError(r, group_end_call, -1, 0, -1, "", "ncclGroupEnd (nested): " + result_name(r));
    return;
  }
  std::vector<GroupCall> calls = std::move(g.calls);
  g.calls.clear();
  auto locks = std::move(g.locks);
  g.locks.clear();
  if (r != ncclSuccess && r != ncclInProgress) {
    // Name the first communicator of the group; NCCL's last error says which failed.
    if (!calls.empty()) throw calls.front().state->error(r, group_end_call);
    throw NcclError(r, group_end_call, -1, 0, -1, "", "ncclGroupEnd: " + result_name(r));
  }
  finish(calls);
}

void group_abandon() noexcept {
  OpenGroup& g = open_group;
  (void)raw::api().GroupEnd();  // NCCL needs the end; what it submits of the group is watched no more
  if (--open_group_depth > 0) return;
  g.calls.clear();
  g.locks.clear();
}

}  // namespace cudakit::nccl::detail

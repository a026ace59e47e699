// The memory of stream states: slots that are reused only for states, each with a
// generation in a header before the state (Note [Stale stream refs] in
// cudakit/detail/stream_state.hpp). Slots are made one at a time and never given back:
// there are as many as streams ever alive at once. A stream's creation and destruction
// take one short lock here, beside the driver's own stream creation.
#include <cstdlib>
#include <mutex>
#include <new>

#include "cudakit/detail/stream_state.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define CUDAKIT_POISON_FREE_STATES 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUDAKIT_POISON_FREE_STATES 1
#endif
#endif
#ifdef CUDAKIT_POISON_FREE_STATES
#include <sanitizer/asan_interface.h>
#endif

namespace cudakit::detail {

namespace {

std::mutex free_slots_mutex;
StreamStateSlotHeader* free_slots = nullptr;  // under free_slots_mutex

void* state_of_slot(StreamStateSlotHeader* h) { return reinterpret_cast<char*>(h) + stream_state_header_bytes; }
StreamStateSlotHeader* slot_of_state(void* p) {
  return reinterpret_cast<StreamStateSlotHeader*>(static_cast<char*>(p) - stream_state_header_bytes);
}

// A free slot's state part is poisoned under AddressSanitizer, so that a use of a freed
// state other than the generation check is still reported.
void mark_free(void* state) {
#ifdef CUDAKIT_POISON_FREE_STATES
  ASAN_POISON_MEMORY_REGION(state, sizeof(StreamState));
#else
  (void)state;
#endif
}
void mark_used(void* state) {
#ifdef CUDAKIT_POISON_FREE_STATES
  ASAN_UNPOISON_MEMORY_REGION(state, sizeof(StreamState));
#else
  (void)state;
#endif
}

}  // namespace

void* StreamState::operator new(std::size_t size) {
  if (size != sizeof(StreamState)) throw std::bad_alloc();  // no class derives from it
  StreamStateSlotHeader* h = nullptr;
  {
    std::lock_guard lock(free_slots_mutex);
    if (free_slots != nullptr) {
      h = free_slots;
      free_slots = h->next_free;
    }
  }
  if (h == nullptr) h = new (::operator new(stream_state_header_bytes + sizeof(StreamState))) StreamStateSlotHeader;
  void* state = state_of_slot(h);
  mark_used(state);
  return state;
}

void StreamState::operator delete(void* p, std::size_t) noexcept {
  if (p == nullptr) return;
  StreamStateSlotHeader* h = slot_of_state(p);
  // Whoever still holds a ref to the state held a ref to a stream that is gone: stale.
  h->generation.fetch_add(1, std::memory_order_relaxed);
  mark_free(p);
  std::lock_guard lock(free_slots_mutex);
  h->next_free = free_slots;
  free_slots = h;
}

void end_generation(StreamState* s) noexcept {
  slot_of_state(s)->generation.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace cudakit::detail

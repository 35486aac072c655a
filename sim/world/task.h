// A move-only callable `void()` for the simulated worlds' event queue. Unlike
// std::function it keeps callables of up to kInlineBytes inside itself: most events of a
// simulation (a lambda holding a few ids and an Event) then cost no heap allocation,
// which dominated the cluster simulator's profile. Larger callables go to the heap.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace dugong::simworld {

class Task {
 public:
  // Enough for a ZooKeeper notification (an Event, 136 bytes) in the per-client
  // delivery's wrapper (ZkEnsemble::schedule).
  static constexpr size_t kInlineBytes = 192;

  Task() = default;
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, Task>>>
  Task(F&& fn) {  // NOLINT(google-explicit-constructor): any callable converts, as to std::function
    construct(std::forward<F>(fn));
  }
  Task(Task&& other) noexcept { take(other); }
  Task& operator=(Task&& other) noexcept {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() { reset(); }

  // Holds `fn` (or what a Task holds), built in place: no move through a temporary Task.
  template <class F>
  void emplace(F&& fn) {
    if constexpr (std::is_same_v<std::decay_t<F>, Task>) {
      static_assert(!std::is_lvalue_reference_v<F>, "a Task is moved in, not copied");
      *this = std::move(fn);
    } else {
      reset();
      construct(std::forward<F>(fn));
    }
  }

  explicit operator bool() const { return ops_ != nullptr; }
  // REQUIRES: a callable is held.
  void operator()() { ops_->invoke(buf_); }
  void reset() {
    if (ops_) ops_->destroy(buf_);
    ops_ = nullptr;
  }

 private:
  struct Ops {
    void (*invoke)(void* buf);
    void (*relocate)(void* from, void* to);  // move-constructs into `to`, destroys `from`
    void (*destroy)(void* buf);
  };
  template <class Fn>
  static constexpr Ops kInlineOps{
      [](void* b) { (*static_cast<Fn*>(b))(); },
      [](void* from, void* to) {
        ::new (to) Fn(std::move(*static_cast<Fn*>(from)));
        static_cast<Fn*>(from)->~Fn();
      },
      [](void* b) { static_cast<Fn*>(b)->~Fn(); }};
  template <class Fn>
  static constexpr Ops kHeapOps{
      [](void* b) { (**static_cast<Fn**>(b))(); },
      [](void* from, void* to) { *static_cast<Fn**>(to) = *static_cast<Fn**>(from); },
      [](void* b) { delete *static_cast<Fn**>(b); }};

  template <class F>
  void construct(F&& fn) {
    using Fn = std::decay_t<F>;
    if constexpr (sizeof(Fn) <= kInlineBytes && alignof(Fn) <= alignof(std::max_align_t) &&
                  std::is_nothrow_move_constructible_v<Fn>) {
      ::new (static_cast<void*>(buf_)) Fn(std::forward<F>(fn));
      ops_ = &kInlineOps<Fn>;
    } else {
      *reinterpret_cast<Fn**>(buf_) = new Fn(std::forward<F>(fn));
      ops_ = &kHeapOps<Fn>;
    }
  }
  void take(Task& other) noexcept {
    if (!other.ops_) return;
    other.ops_->relocate(other.buf_, buf_);
    ops_ = other.ops_;
    other.ops_ = nullptr;
  }

  alignas(std::max_align_t) unsigned char buf_[kInlineBytes];
  const Ops* ops_ = nullptr;
};

}  // namespace dugong::simworld

// Where a simulated world's parts write their trace lines: one kind letter and plain
// words per line. The text is built only while the trace is on (a callable), so that
// the many seeds run unwatched build no strings.
#pragma once

#include <string>

namespace dugong::simworld {

// Kinds used by the shared parts: 'A' an action a peer asked for, 'P' postgres,
// 'F' a fault, 'Z' the ZooKeeper ensemble or client.
class TraceSink {
 public:
  virtual ~TraceSink() = default;

  bool tracing() const { return on_; }
  template <class Text>
  void trace(char kind, const Text& text) {
    if (on_) record(kind, text());
  }

 protected:
  explicit TraceSink(bool on) : on_(on) {}
  virtual void record(char kind, std::string text) = 0;

 private:
  bool on_;
};

}  // namespace dugong::simworld

// One TCP connection on loopback cut as a failed link is: every packet between two ports
// dropped (iptables DROP in INPUT on `lo`, both directions), the connection left open at
// both ends, so that neither side learns of it before its own timeout. The rules are
// removed with the object. A new connection between the same hosts uses another port
// and is not cut. Needs root and iptables (scripts/install-deps.sh installs it).
#pragma once

#include <memory>
#include <string>

namespace dugong::testing {

class LoopbackCut {
 public:
  // Cuts the connection between 127.0.0.1:portA and 127.0.0.1:portB; nullptr (and
  // `whyNot` says why) when it cannot be cut here: not root, no iptables, a rule refused.
  static std::unique_ptr<LoopbackCut> make(int portA, int portB, std::string* whyNot);
  ~LoopbackCut();
  LoopbackCut(const LoopbackCut&) = delete;
  LoopbackCut& operator=(const LoopbackCut&) = delete;

 private:
  LoopbackCut(int portA, int portB) : portA_(portA), portB_(portB) {}
  int portA_;
  int portB_;
};

}  // namespace dugong::testing

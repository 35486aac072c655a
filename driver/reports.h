// Quorum mode's takeover report as this peer's election node holds it (driver/reports.cc,
// which alone changes these fields; docs/decisions/0079-quorum-commit.md 4.2): the state
// machine publishes and withdraws it (PublishReport), the coordinator answers with the
// node's data version (ReportPublished), and a takeover's write checks that version.
#pragma once

namespace dugong::driver {

class Core;

class ReportPublication {
 public:
  // A report is being published or withdrawn, or may stand in the election node (one
  // published, or a publication or withdrawal that failed and so may hold either):
  // nothing else is published in the node meanwhile (the stream watch waits), since any
  // change of its data changes the version the member's own takeover write checks.
  bool mayStand() const { return inFlight_ || mayStand_; }

 private:
  friend class Core;  // reports.cc
  bool inFlight_ = false;
  bool publishing_ = false;  // what is in flight: a report (true) or a withdrawal
  bool mayStand_ = false;    // as of the last answer
};

}  // namespace dugong::driver

// The driver's runner (driver/driver.h): the core's commands carried out on the
// environment, and the environment's answers fed back as inputs.
#include "driver/driver.h"

#include <utility>

#include "statemachine/overloaded.h"

namespace dugong::driver {

Runner::Runner(Env env, DriverOptions options)
    : env_(env), opts_(options), core_(std::move(options), env.peers != nullptr) {}

Runner::~Runner() = default;

template <class T, class MakeInput>
std::function<void(T)> Runner::answer(MakeInput make, bool posted) {
  return [this, alive = std::weak_ptr<int>(alive_), make = std::move(make), posted](T value) {
    if (alive.expired() || core_.stopping()) return;
    if (!posted) return feed(make(std::move(value)));
    env_.clock.post([this, alive, input = make(std::move(value))]() mutable {
      if (!alive.expired() && !core_.stopping()) feed(std::move(input));
    });
  };
}

bool Runner::start() {
  feed(in::Start{});
  return !core_.failed();
}

void Runner::stop(std::function<void()> done) {
  if (core_.stopping()) return;
  stopped_ = std::move(done);
  feed(in::Stop{});
}

FailsafeAnswer Runner::onFailsafeRequest(const FailsafeRequest& request) {
  if (carryingOut_) return FailsafeAnswer{false, "the agent is busy; ask again"};
  answered_.reset();
  feed(in::FailsafeAsked{request});
  return answered_.value_or(FailsafeAnswer{false, "the agent is stopping"});
}

void Runner::resume() {
  paused_ = false;
  if (carryingOut_ || pending_.empty()) return;
  Input first = std::move(pending_.front());
  pending_.pop_front();
  feed(std::move(first));
}

void Runner::feed(Input input) {
  if (carryingOut_ || paused_) {
    pending_.push_back(std::move(input));
    return;
  }
  carryingOut_ = true;
  const std::weak_ptr<int> alive = alive_;
  std::optional<Input> next = std::move(input);
  // A buffer kept from the last feed (held here, as this driver may be gone after any
  // command), so that stepping the core does not allocate anew for every input.
  std::vector<Command> commands = std::move(spareCommands_);
  while (next) {
    const Moment now{env_.clock.monotonicMs(), env_.clock.wallMs(), env_.postgres.postmasterGone(),
                      env_.postgres.streamSample()};
    core_.step(now, *next, commands);
    for (Command& c : commands) {
      carryOut(std::move(c));
      if (alive.expired()) return;
    }
    next.reset();
    if (!pending_.empty()) {
      next = std::move(pending_.front());
      pending_.pop_front();
    }
  }
  commands.clear();
  spareCommands_ = std::move(commands);
  carryingOut_ = false;
}

void Runner::carryOut(Command command) {
  auto& pg = env_.postgres;
  std::visit(
      Overloaded{
          [&](cmd::InitPostgres& c) {
            pg.init(answer<PgInitialized>([r = c.afterRebuild](PgInitialized e) { return in::Initialized{e, r}; }));
          },
          [&](cmd::StartHealthCheck&) {
            pg.startHealthCheck([this, alive = std::weak_ptr<int>(alive_)](bool healthy, const std::string& detail) {
              if (!alive.expired() && !core_.stopping()) feed(in::Health{healthy, detail});
            });
          },
          [&](cmd::StopHealthCheck&) { pg.stopHealthCheck(); },
          [&](cmd::ApplyPg& c) {
            pg.apply(c.config, answer<PgConfigApplied>([config = c.config, fromPeer = c.fromPeer](PgConfigApplied r) {
                       return in::Applied{config, fromPeer, std::move(r)};
                     }));
          },
          [&](cmd::FencePg& c) {
            if (c.quorum) {
              // Posted: the default implementation answers inside the call.
              return pg.fenceQuorum(*c.quorum, c.endWalsenders, c.timeoutMs,
                                    answer<PgFenced>([](PgFenced r) { return in::Fenced{std::move(r)}; }, true));
            }
            pg.fence(c.newSync, answer<PgFenced>([](PgFenced r) { return in::Fenced{std::move(r)}; }));
          },
          [&](cmd::ReadWal&) {
            pg.readWal(answer<WalPositionRead>([](WalPositionRead r) { return in::WalRead{std::move(r)}; }));
          },
          // Answered on a later turn of the loop: the default implementations of these
          // answer inside the call.
          [&](cmd::ReadDataState&) {
            pg.readDataState(answer<Result<PeerDataState>>(
                [](Result<PeerDataState> r) { return in::DataStateRead{std::move(r)}; }, true));
          },
          [&](cmd::StopWrites&) {
            pg.stopWrites(answer<Result<int>>([](Result<int> r) { return in::WritesStopped{std::move(r)}; }, true));
          },
          [&](cmd::ShutDownWrites&) {
            pg.shutDownWrites(answer<Result<bool>>([](Result<bool> r) { return in::ShutDown{std::move(r)}; }, true));
          },
          [&](cmd::ResumeWrites& c) {
            pg.resumeWrites(answer<Result<bool>>(
                [n = c.noTakeoverCanLand](Result<bool> r) { return in::WritesResumed{n, std::move(r)}; }, true));
          },
          [&](cmd::AwaitUpstreamStop& c) {
            pg.awaitUpstreamStop(c.timeoutMs, answer<bool>([newSync = c.newSync](bool ended) {
                                   return in::UpstreamStopped{newSync, ended};
                                 }));
          },
          [&](cmd::Rejoin& c) {
            pg.rejoin(c.primary, c.policy, answer<RejoinFinished>([primary = c.primary](RejoinFinished r) {
                        return in::Rejoined{primary, std::move(r)};
                      }));
          },
          [&](cmd::SampleSync& c) {
            pg.sampleSyncStandby(c.sync, answer<Result<SyncReplicationSample>>(
                                             [g = c.generation, s = c.sync](Result<SyncReplicationSample> r) {
                                               return in::SyncSampled{g, s, std::move(r)};
                                             }));
          },
          [&](cmd::SampleMembers& c) {
            pg.sampleQuorumMembers(c.members, answer<Result<QuorumReplicationSample>>(
                                                  [g = c.generation, m = c.members](Result<QuorumReplicationSample> r) {
                                                    return in::MembersSampled{g, m, std::move(r)};
                                                  },
                                                  true));  // the default answers inside the call
          },
          [&](cmd::StopPostgresAndFinish&) {
            pg.apply(PgConfig::none(), [this, alive = std::weak_ptr<int>(alive_),
                                        done = std::exchange(stopped_, nullptr)](const PgConfigApplied& r) {
              if (!r.ok && !alive.expired()) env_.log.write(LogLevel::kError, "stopping postgres failed: " + r.error);
              if (done) done();
            });
          },
          [&](cmd::Finish&) {
            if (stopped_) env_.clock.post(std::exchange(stopped_, nullptr));
          },
          [&](cmd::Join&) {
            CoordinatorCallbacks cb;
            cb.onEvent = answer<Event>([](Event e) { return in::Delivered{std::move(e)}; });
            cb.onConnection = answer<CoordinatorConnection>([](CoordinatorConnection c) { return in::Connection{c}; });
            cb.onLease = answer<CoordinatorLease>([](CoordinatorLease l) { return in::Lease{l}; });
            if (auto ok = env_.coordinator.join(std::move(cb)); !ok) feed(in::JoinRefused{ok.error()});
          },
          [&](cmd::Leave& c) {
            if (c.keepingMembership) {
              env_.coordinator.leaveKeepingMembership();
            } else {
              env_.coordinator.leave();
            }
          },
          [&](cmd::PutState& c) {
            auto done =
                answer<StateWriteFinished>([purpose = c.purpose, version = c.expectedVersion](StateWriteFinished r) {
                  return in::StateWritten{purpose, version, std::move(r)};
                }, !c.checks.empty());  // the default checked write answers inside the call
            if (c.checks.empty()) return env_.coordinator.putClusterState(c.state, c.expectedVersion, c.reason, done);
            env_.coordinator.putCheckedClusterState(c.state, c.expectedVersion, c.reason, c.checks, done);
          },
          [&](cmd::PublishDataState& c) { env_.coordinator.publishDataState(c.data); },
          [&](cmd::PublishStreaming& c) { env_.coordinator.publishStreaming(c.streams); },
          // Answered on a later turn of the loop: the default implementation answers inside the call.
          [&](cmd::PublishReport& c) {
            env_.coordinator.publishReport(
                c.report, answer<ReportPublished>([](ReportPublished r) { return in::ReportPublished{std::move(r)}; },
                                                  true));
          },
          [&](cmd::AskFailsafe& c) {
            if (!env_.peers) return;
            env_.peers->askFailsafe(
                c.to, c.request, c.timeoutMs,
                answer<Result<FailsafeAnswer>>(
                    [s = c.sentAt, g = c.generation, n = c.session, from = c.to.id,
                     release = c.request.release](Result<FailsafeAnswer> r) {
                      return in::FailsafeAnswered{s, g, n, std::move(r), from, release};
                }));
          },
          [&](cmd::AnswerFailsafe& c) {
            // A promise a restart would forget is not given.
            if (c.recordUntilMs && opts_.recordPromise) {
              if (auto recorded = opts_.recordPromise(*c.recordUntilMs); !recorded) {
                env_.log.write(LogLevel::kError, "failsafe: the promise cannot be recorded (" + recorded.error() +
                                                     "): refused, since a restart of this agent would forget it");
                c.answer = FailsafeAnswer{false, "this peer cannot record its promise, which a restart of its agent "
                                                 "would then forget: " + recorded.error()};
              }
            }
            answered_ = c.answer;
          },
          [&](cmd::SetTimer& c) {
            auto& timer = timers_[c.key];
            if (!timer) timer = env_.clock.newTimer();
            timer->start(c.delayMs, [this, alive = std::weak_ptr<int>(alive_), key = c.key] {
              if (!alive.expired() && !core_.stopping()) feed(in::Timer{key});
            });
          },
          [&](cmd::CancelTimer& c) {
            if (auto it = timers_.find(c.key); it != timers_.end()) it->second->cancel();
          },
          [&](cmd::Later& c) {
            env_.clock.post([this, alive = std::weak_ptr<int>(alive_), event = std::move(c.event)]() mutable {
              if (!alive.expired() && !core_.stopping()) feed(in::Delivered{std::move(event)});
            });
          },
          [&](cmd::PrimaryApplyStarting&) {
            if (opts_.onPrimaryApplyStarting) opts_.onPrimaryApplyStarting();
          },
          [&](cmd::RoleApplied& c) {
            if (opts_.onRoleApplied) opts_.onRoleApplied(c.previous, c.applied);
          },
          [&](cmd::PrimaryConnectionLoss& c) {
            if (opts_.onPrimaryConnectionLoss) opts_.onPrimaryConnectionLoss(c.lost);
          },
          [&](cmd::LeaseDeadline& c) {
            if (opts_.onLeaseDeadline) opts_.onLeaseDeadline(c.deadlineMs);
          },
          [&](cmd::Log& c) { env_.log.write(c.level, c.line); },
          [&](cmd::Fatal&) {
            if (onFatal_) env_.clock.post(onFatal_);
          },
      },
      command);
}

}  // namespace dugong::driver

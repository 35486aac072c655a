// The ZooKeeper session an agent keeps across a restart: its id and password in a
// file beside the data directory (mode 0600, written atomically), so that a restarted
// agent re-attaches to it (zk::ZkOptions::resume) and its peers see no change.
//
// The file also names who wrote it (host, machine id, peer id, ZooKeeper root, data
// directory). A file that names anyone else, e.g. one copied to another host with the
// data directory, is refused: two agents must never share a session.
#pragma once

#include <optional>
#include <string>

#include "statemachine/result.h"
#include "zk/options.h"

namespace dugong::agent {

struct SessionOwner {
  std::string host;       // gethostname()
  std::string machineId;  // /etc/machine-id, when readable
  std::string peerId;
  std::string zkRoot;     // connect-string chroot + cluster root
  std::string dataDir;

  // This process, for this peer.
  static SessionOwner current(const std::string& peerId, const std::string& zkRoot, const std::string& dataDir);
  // Empty when `other` is this owner; else what differs, in words.
  std::string differences(const SessionOwner& other) const;
};

class SessionFile {
 public:
  SessionFile(std::string path, SessionOwner owner) : path_(std::move(path)), owner_(std::move(owner)) {}
  const std::string& path() const { return path_; }

  // The saved session: nullopt when there is no file. An error for a file that cannot
  // be read or parsed, or that another owner wrote (the error says who and what differs).
  Result<std::optional<zk::SessionCredentials>> load() const;
  // Writes a temporary file (0600), syncs it and renames it over the file.
  Result<bool> save(const zk::SessionCredentials& session) const;
  // Removes the file; no file is no error.
  Result<bool> remove() const;

 private:
  std::string path_;
  SessionOwner owner_;
};

}  // namespace dugong::agent

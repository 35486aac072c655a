// TLS for postgres: the server's certificate (postgres' ssl settings), pg_hba's
// hostssl-only mode, and the client side of every TCP connection dugong makes to a
// postgres (the agent's and dugong-adm's queries to a peer, replication's
// primary_conninfo, pg_basebackup and pg_rewind): libpq's sslmode, sslrootcert, sslcert
// and sslkey. Connections through the local Unix socket never use TLS (libpq does not
// on a socket); they need none.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "statemachine/result.h"

namespace dugong::pg {

struct PgTls {
  // The server side. certFile and keyFile (PEM) together turn postgres' ssl on (ssl,
  // ssl_cert_file, ssl_key_file); caFile (ssl_ca_file) makes postgres ask clients for a
  // certificate it can verify (and accept the clients that send one). The key must be
  // readable by the postgres OS user and by nobody else (0600, or 0640 owned by root),
  // as postgres requires. Default: none (ssl off).
  std::string certFile;
  std::string keyFile;
  std::string caFile;
  // pg_hba's TCP lines are hostssl: postgres refuses every TCP connection without TLS.
  // Needs certFile. Default false (host lines: TLS as the client asks).
  bool hostsslOnly = false;

  // The client side: libpq's sslmode (disable, allow, prefer, require, verify-ca,
  // verify-full). Default prefer: TLS when the server offers it.
  std::string sslmode = "prefer";
  // The CA the server's certificate must chain to (sslrootcert), required by verify-ca
  // and verify-full. Default: caFile.
  std::string rootCertFile;
  // A client certificate and key (sslcert, sslkey) for servers that ask for one. The
  // postgres OS user must read them too (its WAL receiver connects with them).
  std::string clientCertFile;
  std::string clientKeyFile;

  bool serverTls() const { return !certFile.empty(); }
  std::string rootCert() const { return rootCertFile.empty() ? caFile : rootCertFile; }
};

// Checks modes, pairs of options and that every named file exists and is readable (a
// private key also that it is not readable by others). The first problem, precisely.
Result<bool> validateTls(const PgTls& tls);

// The libpq connection parameters for a TCP connection: sslmode and, when set,
// sslrootcert, sslcert, sslkey.
std::map<std::string, std::string> clientTlsParams(const PgTls& tls);

// postgresql.conf settings (name, value) for the server side: ssl = on and its files
// when certFile is set; none otherwise (postgres' own default, or `settings`, hold).
std::vector<std::pair<std::string, std::string>> serverTlsSettings(const PgTls& tls);

// The pg_hba connection type of TCP lines: "hostssl" when hostsslOnly, else "host".
std::string hbaTcpType(const PgTls& tls);

}  // namespace dugong::pg

// TLS options (pg/tls.h): validation with precise messages, the client's libpq
// parameters, postgres' settings in the managed dugong.conf.
#include "pg/tls.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "pg/connection.h"
#include "pg/managed_conf.h"
#include "pg/sql.h"
#include "pg/testing/test_certs.h"
#include "tests/support/test_env.h"

namespace dugong::pg {
namespace {

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto made = testing::makeTestCerts(scratch_.path() + "/certs", "tls", "postgres");
    ASSERT_TRUE(made.ok()) << made.error();
    certs_ = made.value();
  }
  PgTls server() const {
    PgTls t;
    t.certFile = certs_.certFile;
    t.keyFile = certs_.keyFile;
    t.caFile = certs_.caFile;
    return t;
  }
  static std::string problem(const PgTls& t) {
    auto r = validateTls(t);
    return r ? "" : r.error();
  }

  dugong::testing::ScratchDir scratch_{"dugong-tls"};
  testing::TestCerts certs_;
};

TEST_F(TlsTest, DefaultsArePreferWithoutServerTls) {
  PgTls t;
  EXPECT_EQ(problem(t), "");
  EXPECT_EQ(clientTlsParams(t), (std::map<std::string, std::string>{{"sslmode", "prefer"}}));
  EXPECT_EQ(hbaTcpType(t), "host");
  EXPECT_FALSE(t.serverTls());
}

TEST_F(TlsTest, AFullConfigurationIsValid) {
  PgTls t = server();
  t.hostsslOnly = true;
  t.sslmode = "verify-full";
  t.clientCertFile = certs_.certFile;
  t.clientKeyFile = certs_.keyFile;
  EXPECT_EQ(problem(t), "");
  EXPECT_EQ(hbaTcpType(t), "hostssl");
  EXPECT_EQ(clientTlsParams(t), (std::map<std::string, std::string>{{"sslmode", "verify-full"},
                                                                    {"sslrootcert", certs_.caFile},
                                                                    {"sslcert", certs_.certFile},
                                                                    {"sslkey", certs_.keyFile}}));
  // What the client parameters give is a connection string libpq reads as it is.
  EXPECT_TRUE(parseConninfo(buildConninfo(clientTlsParams(t))).ok());
}

TEST_F(TlsTest, BadConfigurationsGiveClearErrors) {
  PgTls t;
  t.sslmode = "verify";
  EXPECT_NE(problem(t).find("tls.sslmode 'verify' is not one of"), std::string::npos) << problem(t);
  t = PgTls();
  t.sslmode = "verify-full";
  EXPECT_NE(problem(t).find("set tls.rootCertFile (or tls.caFile)"), std::string::npos) << problem(t);
  t = PgTls();
  t.hostsslOnly = true;
  EXPECT_NE(problem(t).find("tls.hostsslOnly needs tls.certFile"), std::string::npos) << problem(t);
  t = server();
  t.hostsslOnly = true;
  t.sslmode = "disable";
  EXPECT_NE(problem(t).find("does not try TLS first"), std::string::npos) << problem(t);
  t = server();
  t.keyFile.clear();
  EXPECT_NE(problem(t).find("go together"), std::string::npos) << problem(t);
  t = server();
  t.certFile = scratch_.path() + "/missing.crt";
  EXPECT_NE(problem(t).find("tls.certFile " + t.certFile + " is not a file"), std::string::npos) << problem(t);
  t = PgTls();
  t.rootCertFile = "relative.crt";
  EXPECT_NE(problem(t).find("must be an absolute path"), std::string::npos) << problem(t);
  ::chmod(certs_.keyFile.c_str(), 0644);
  EXPECT_NE(problem(server()).find("is readable by others"), std::string::npos) << problem(server());
}

TEST_F(TlsTest, TheManagedConfTurnsSslOnWithTheFiles) {
  PgOptions o;
  o.dataDir = "/tmp/x";
  EXPECT_EQ(renderManagedConf(o, ManagedState{}).find("ssl"), std::string::npos);
  o.tls = server();
  const std::string conf = renderManagedConf(o, ManagedState{});
  EXPECT_NE(conf.find("\nssl = 'on'\n"), std::string::npos) << conf;
  EXPECT_NE(conf.find("\nssl_cert_file = " + confQuote(certs_.certFile) + "\n"), std::string::npos) << conf;
  EXPECT_NE(conf.find("\nssl_key_file = " + confQuote(certs_.keyFile) + "\n"), std::string::npos) << conf;
  EXPECT_NE(conf.find("\nssl_ca_file = " + confQuote(certs_.caFile) + "\n"), std::string::npos) << conf;
}

}  // namespace
}  // namespace dugong::pg

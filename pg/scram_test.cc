#include "pg/scram.h"

#include <gtest/gtest.h>

namespace dugong::pg {
namespace {

// RFC 4648, section 10.
TEST(Base64, Rfc4648Vectors) {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(base64Encode(plain), encoded);
    auto back = base64Decode(encoded);
    ASSERT_TRUE(back.ok()) << back.error();
    EXPECT_EQ(back.value(), plain);
  }
}

TEST(Base64, RejectsMalformedText) {
  EXPECT_FALSE(base64Decode("Zm9").ok());
  EXPECT_FALSE(base64Decode("Zm9=Zm9v").ok());
  EXPECT_FALSE(base64Decode("Zm*v").ok());
  EXPECT_FALSE(base64Decode("Z===").ok());
}

// RFC 7677, section 3: the whole exchange with its nonce, salt and iteration count.
TEST(ScramClient, Rfc7677Exchange) {
  ScramClient c("pencil", "rOprNGfwEbeRWgbNEkqO", "user");
  EXPECT_EQ(c.clientFirst(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
  auto final = c.clientFinal("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096");
  ASSERT_TRUE(final.ok()) << final.error();
  EXPECT_EQ(final.value(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=");
  EXPECT_TRUE(c.verifyServerFinal("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=").ok());
  // A server that does not know the password cannot sign.
  EXPECT_FALSE(c.verifyServerFinal("v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=").ok());
  auto refused = c.verifyServerFinal("e=invalid-proof");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().find("invalid-proof"), std::string::npos);
}

TEST(ScramClient, RefusesAServerFirstMessageThatDoesNotExtendTheNonce) {
  ScramClient c("pencil", "abc");
  EXPECT_FALSE(c.clientFinal("r=xyz123,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096").ok());
  EXPECT_FALSE(c.clientFinal("r=abc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096").ok());  // nothing added
  EXPECT_FALSE(c.clientFinal("r=abc123,i=4096").ok());                          // no salt
  EXPECT_FALSE(c.clientFinal("r=abc123,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=0").ok());
  EXPECT_FALSE(c.clientFinal("r=abc123,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=12x").ok());
  EXPECT_FALSE(c.verifyServerFinal("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=").ok());  // no exchange
}

// The verifier of RFC 7677's password and salt: its StoredKey and ServerKey follow
// from the exchange above (ClientKey XOR ClientSignature = proof), and the format is
// PostgreSQL's.
TEST(ScramVerifier, FormatAndKeysOfRfc7677sPassword) {
  auto salt = base64Decode("W22ZaJ0SNY7soEsUEjb6gQ==");
  ASSERT_TRUE(salt.ok());
  const std::string v = scramVerifier("pencil", salt.value(), 4096);
  EXPECT_EQ(v.rfind("SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$", 0), 0u) << v;
  // StoredKey = H(ClientKey), ServerKey = HMAC(SaltedPassword, "Server Key"), as
  // computed independently with Python's hashlib.pbkdf2_hmac and hmac.
  EXPECT_EQ(v,
            "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:"
            "wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=");
  // A random salt of 16 bytes each time.
  EXPECT_NE(scramVerifier("pencil", randomBytes(16)), scramVerifier("pencil", randomBytes(16)));
}

}  // namespace
}  // namespace dugong::pg

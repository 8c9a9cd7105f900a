// TlsCerts: a private PKI for TLS tests, made with the openssl CLI in a
// fresh temporary directory (removed by the destructor).
//
//   ca_file            the test CA (self-signed)
//   server_cert/_key   issued by it for localhost, 127.0.0.1 and ::1 (SAN)
//   client_cert/_key   issued by it for client authentication (mutual TLS)
//   expired_cert/_key  a server certificate of the same CA that expired
//                      yesterday (same names)
//   other_ca_file      another CA, which signed
//   other_server_cert/_key  a server certificate for the same names, and
//   other_client_cert/_key  a client certificate
//   ca_dir             a directory holding ca_file in OpenSSL's hashed layout
//                      (openssl rehash)
//
// Keys are unencrypted EC P-256. Tests skip (GTEST_SKIP) when
// OpenSslAvailable() is false: scripts/setup.sh installs the `openssl`
// package.
#pragma once

#include <string>
#include <vector>

namespace lockfleet::testing {

class TlsCerts {
 public:
  // Whether `openssl version` runs.
  static bool OpenSslAvailable();

  // Makes everything. Throws std::runtime_error naming the command that
  // failed and its output.
  TlsCerts();
  ~TlsCerts();
  TlsCerts(const TlsCerts&) = delete;
  TlsCerts& operator=(const TlsCerts&) = delete;

  std::string dir;
  std::string ca_file;
  std::string ca_dir;
  std::string server_cert, server_key;
  std::string client_cert, client_key;
  std::string expired_cert, expired_key;
  std::string other_ca_file;
  std::string other_server_cert, other_server_key;
  std::string other_client_cert, other_client_key;

 private:
  void Run(const std::vector<std::string>& args) const;
  // Key and certificate `name` (.key/.crt) for subject `cn`, issued by
  // `ca` (its .crt/.key basename) with the extensions section `ext` of the
  // config, valid for `days` (negative: already expired).
  void Issue(const std::string& name, const std::string& cn,
             const std::string& ca, const std::string& ext, int days) const;
  void MakeCa(const std::string& name, const std::string& cn) const;
};

}  // namespace lockfleet::testing

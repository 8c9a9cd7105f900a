#include "tls_certs.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "support/spawn_server.h"

namespace lockfleet::testing {
namespace {

constexpr char kConfig[] = R"([req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca_ext]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[server_ext]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost,IP:127.0.0.1,IP:::1
authorityKeyIdentifier = keyid
[client_ext]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = clientAuth
authorityKeyIdentifier = keyid
)";

// Runs `args`, output appended to `log`; its exit status (127: no program).
int RunProgram(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = SpawnServer(args, log);
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

bool TlsCerts::OpenSslAvailable() {
  return RunProgram({"openssl", "version"}, "/dev/null") == 0;
}

TlsCerts::TlsCerts() {
  char tmpl[] = "/tmp/lockfleet-tls-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir = tmpl;
  try {
    std::ofstream(dir + "/openssl.cnf") << kConfig;
    MakeCa("ca", "lockfleet test CA");
    MakeCa("other_ca", "another test CA");
    Issue("server", "localhost", "ca", "server_ext", 365);
    Issue("client", "lockfleet test client", "ca", "client_ext", 365);
    Issue("expired", "localhost", "ca", "server_ext", -1);
    Issue("other_server", "localhost", "other_ca", "server_ext", 365);
    Issue("other_client", "lockfleet test client", "other_ca", "client_ext",
          365);
    ca_file = dir + "/ca.crt";
    other_ca_file = dir + "/other_ca.crt";
    server_cert = dir + "/server.crt";
    server_key = dir + "/server.key";
    client_cert = dir + "/client.crt";
    client_key = dir + "/client.key";
    expired_cert = dir + "/expired.crt";
    expired_key = dir + "/expired.key";
    other_server_cert = dir + "/other_server.crt";
    other_server_key = dir + "/other_server.key";
    other_client_cert = dir + "/other_client.crt";
    other_client_key = dir + "/other_client.key";
    ca_dir = dir + "/cadir";
    std::filesystem::create_directory(ca_dir);
    std::filesystem::copy_file(ca_file, ca_dir + "/ca.pem");
    Run({"openssl", "rehash", ca_dir});
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
    throw;
  }
}

TlsCerts::~TlsCerts() {
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

void TlsCerts::Run(const std::vector<std::string>& args) const {
  const std::string log = dir + "/openssl.log";
  std::filesystem::remove(log);
  if (RunProgram(args, log) == 0) return;
  std::string command;
  for (const std::string& arg : args) command += arg + " ";
  std::stringstream output;
  output << std::ifstream(log).rdbuf();
  throw std::runtime_error("failed: " + command + "\n" + output.str());
}

void TlsCerts::MakeCa(const std::string& name, const std::string& cn) const {
  Run({"openssl",
       "req",
       "-x509",
       "-config",
       dir + "/openssl.cnf",
       "-newkey",
       "ec",
       "-pkeyopt",
       "ec_paramgen_curve:prime256v1",
       "-nodes",
       "-keyout",
       dir + "/" + name + ".key",
       "-out",
       dir + "/" + name + ".crt",
       "-days",
       "3650",
       "-subj",
       "/CN=" + cn,
       "-extensions",
       "ca_ext"});
}

void TlsCerts::Issue(const std::string& name, const std::string& cn,
                     const std::string& ca, const std::string& ext,
                     int days) const {
  const std::string base = dir + "/" + name;
  Run({"openssl", "req", "-new", "-config", dir + "/openssl.cnf", "-newkey",
       "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
       base + ".key", "-out", base + ".csr", "-subj", "/CN=" + cn});
  Run({"openssl", "x509", "-req", "-in", base + ".csr", "-CA",
       dir + "/" + ca + ".crt", "-CAkey", dir + "/" + ca + ".key",
       "-CAcreateserial", "-days", std::to_string(days), "-extfile",
       dir + "/openssl.cnf", "-extensions", ext, "-out", base + ".crt"});
}

}  // namespace lockfleet::testing

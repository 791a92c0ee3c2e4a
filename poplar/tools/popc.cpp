// ipuxl's popc: compiles a codelet source for the host into an object that
// Graph::addCodelets loads (the SDK's popc compiles for the IPU instead).
//   popc codelets.cpp -o codelets.gp [-I dir] [-D name] [-O2] [--target ...]
#include <cstdio>
#include <cstring>
#include <string>

extern "C" int ipuxl_popc_compile(const char *src, const char *out, const char *flags, char *err, unsigned errLen);

int main(int argc, char **argv) {
  std::string src, out, flags;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-o" && i + 1 < argc) {
      out = argv[++i];
    } else if ((a == "-I" || a == "-D") && i + 1 < argc) {
      flags += " " + a + "'" + argv[++i] + "'";
    } else if (a.rfind("-I", 0) == 0 || a.rfind("-D", 0) == 0) {
      flags += " '" + a + "'";
    } else if (a == "--target" || a == "-target") {
      ++i; // the host is the only target here
    } else if (a.rfind("--target=", 0) == 0 || a.rfind("-O", 0) == 0 || a == "-g" || a == "--help") {
      if (a == "--help") {
        std::printf("usage: popc SOURCE -o OUTPUT [-I dir] [-D name[=value]]\n");
        return 0;
      }
    } else if (!a.empty() && a[0] != '-') {
      src = a;
    } else {
      std::fprintf(stderr, "popc (ipuxl): unsupported option '%s'\n", a.c_str());
      return 2;
    }
  }
  if (src.empty() || out.empty()) {
    std::fprintf(stderr, "usage: popc SOURCE -o OUTPUT [-I dir] [-D name[=value]]\n");
    return 2;
  }
  static char err[65536];
  if (ipuxl_popc_compile(src.c_str(), out.c_str(), flags.c_str(), err, sizeof err) != 0) {
    std::fprintf(stderr, "%s\n", err);
    return 1;
  }
  return 0;
}

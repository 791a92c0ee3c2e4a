// ipuxl's Poplar: codelets. A codelet source is compiled for the host (as
// the SDK's IPUModel does) with the system C++ compiler into a shared
// object. Its vertex classes (derived from Vertex, MultiVertex or
// SupervisorVertex) and their members are found by a light parse of the
// preprocessed source, and a generated shim registers each class and field
// with the runtime, so connections are made by name.
#include "impl.hpp"

#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <functional>
#include <poplar/exceptions.hpp>
#include <regex>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#ifndef IPUXL_POPLAR_SOURCE_INCLUDE_DIR
#define IPUXL_POPLAR_SOURCE_INCLUDE_DIR ""
#endif

namespace poplar {
namespace ipuxl_detail {

namespace {

bool fileExists(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

std::string quote(const std::string &s) {
  std::string out = "'";
  for (char c : s) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// Runs a shell command; returns its exit status, with stdout+stderr in `output`.
int runCommand(const std::string &cmd, std::string &output) {
  output.clear();
  FILE *p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, n);
  int rc = ::pclose(p);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string compiler() { return "c++"; }

std::string cacheDir() {
  std::string base = readEnvironment("XDG_CACHE_HOME");
  if (base.empty()) {
    std::string home = readEnvironment("HOME");
    base = home.empty() ? "/tmp" : home + "/.cache";
  }
  std::string dir = base + "/ipuxl/poplar-codelets";
  std::string out;
  runCommand("mkdir -p " + quote(dir), out);
  return dir;
}

std::string absolutePath(const std::string &p) {
  if (!p.empty() && p[0] == '/') return p;
  char buf[4096];
  if (!::getcwd(buf, sizeof buf)) return p;
  return std::string(buf) + "/" + p;
}

struct ParsedVertex {
  std::string qualifiedName;          // as registered: ns::X or ns::X<float>
  std::string cppName;                // as written in the shim
  std::vector<std::string> fields;
};

bool isIdent(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string trim(const std::string &s) {
  std::size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

/// Skips from the '{' at `i` to just after its matching '}'.
std::size_t skipBlock(const std::string &s, std::size_t i) {
  int depth = 0;
  for (; i < s.size(); ++i) {
    if (s[i] == '{') ++depth;
    else if (s[i] == '}' && --depth == 0) return i + 1;
  }
  return s.size();
}

/// The data members declared at the top level of a class body.
std::vector<std::string> parseMembers(const std::string &body) {
  std::vector<std::string> names;
  std::string stmt;
  auto finish = [&]() {
    std::string t = trim(stmt);
    stmt.clear();
    // Drop access labels.
    static const std::regex label(R"(^\s*(public|private|protected)\s*:)");
    std::smatch m;
    while (std::regex_search(t, m, label)) t = trim(m.suffix().str());
    if (t.empty() || t.find('(') != std::string::npos) return;
    static const std::regex skip(R"(^(static|using|typedef|friend|template|enum|class|struct|union|constexpr)\b)");
    if (std::regex_search(t, skip)) return;
    // Split declarators on commas outside <...>.
    std::vector<std::string> parts;
    int angle = 0;
    std::string cur;
    for (char c : t) {
      if (c == '<') ++angle;
      if (c == '>') --angle;
      if (c == ',' && angle == 0) {
        parts.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    parts.push_back(cur);
    for (auto &p : parts) {
      std::string d = p;
      std::size_t cut = d.find_first_of("={[");
      if (cut != std::string::npos) {
        if (d[cut] == '[') continue; // arrays are not fields
        d = d.substr(0, cut);
      }
      d = trim(d);
      std::size_t e = d.size();
      while (e > 0 && !isIdent(d[e - 1])) --e;
      std::size_t b = e;
      while (b > 0 && isIdent(d[b - 1])) --b;
      if (b < e && b > 0) names.push_back(d.substr(b, e - b));
    }
  };
  for (std::size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c == '{') {
      bool isFunction = stmt.find('(') != std::string::npos;
      static const std::regex nested(R"((^|\s)(class|struct|union|enum)\b)");
      bool isNested = std::regex_search(stmt, nested);
      std::size_t j = skipBlock(body, i);
      if (isFunction) {
        stmt.clear();
        i = j - 1;
        continue;
      }
      if (isNested) {
        // Skip to the end of the nested declaration.
        while (j < body.size() && body[j] != ';') ++j;
        stmt.clear();
        i = j;
        continue;
      }
      stmt += " ";
      i = j - 1; // brace initialiser
      continue;
    }
    if (c == ';') {
      finish();
      continue;
    }
    stmt += c;
    // An access label ends a statement of its own.
    if (c == ':' && (i + 1 >= body.size() || body[i + 1] != ':') && (i == 0 || body[i - 1] != ':')) {
      std::string t = trim(stmt);
      if (t == "public:" || t == "private:" || t == "protected:" ||
          std::regex_search(t, std::regex(R"((public|private|protected)\s*:$)")))
        stmt.clear();
    }
  }
  return names;
}

/// Finds the vertex classes of a preprocessed translation unit.
std::vector<ParsedVertex> parseVertices(std::string src) {
  // Attributes ([[poplar::constraint(...)]]) and string literals carry no members.
  src = std::regex_replace(src, std::regex(R"(\[\[[^\]]*\]\])"), " ");
  std::vector<ParsedVertex> out;
  std::vector<std::string> nsStack;   // one entry per open brace: namespace name or ""
  std::vector<bool> isNs;
  std::map<std::string, std::vector<std::string>> templateFields; // qualified template name -> fields
  static const std::regex head(
      R"((template\s*<[^{;]*>\s*)?(class|struct)\s+([A-Za-z_]\w*)\s*(final\s*)?:\s*(public\s+|protected\s+|private\s+)?(::)?(poplar\s*::\s*)?(Vertex|MultiVertex|SupervisorVertex)\s*\{)");
  static const std::regex nsHead(R"(namespace\s+([A-Za-z_][\w:]*)?\s*$)");
  static const std::regex inst(R"(template\s+(class|struct)\s+([A-Za-z_][\w:]*)\s*<([^;]*)>\s*;)");
  std::size_t stmtStart = 0;
  auto prefix = [&]() {
    std::string p;
    for (std::size_t k = 0; k < nsStack.size(); ++k)
      if (isNs[k] && !nsStack[k].empty()) p += nsStack[k] + "::";
    return p;
  };
  for (std::size_t i = 0; i < src.size(); ++i) {
    char c = src[i];
    if (c == '"' || c == '\'') { // skip literals
      char q = c;
      for (++i; i < src.size() && src[i] != q; ++i)
        if (src[i] == '\\') ++i;
      continue;
    }
    if (c == ';' || c == '}') {
      if (c == '}' && !nsStack.empty()) {
        nsStack.pop_back();
        isNs.pop_back();
      }
      if (c == ';') {
        std::string stmt = src.substr(stmtStart, i + 1 - stmtStart);
        std::smatch m;
        if (stmt.find("template") != std::string::npos && std::regex_search(stmt, m, inst)) {
          std::string name = m[2].str();
          std::string q = name.find("::") != std::string::npos ? name : prefix() + name;
          auto it = templateFields.find(q);
          if (it != templateFields.end()) {
            std::string args = std::regex_replace(trim(m[3].str()), std::regex(R"(\s*,\s*)"), ",");
            ParsedVertex v;
            v.qualifiedName = q + "<" + args + ">";
            v.cppName = "::" + v.qualifiedName;
            v.fields = it->second;
            out.push_back(v);
          }
        }
      }
      stmtStart = i + 1;
      continue;
    }
    if (c == '{') {
      std::string before = src.substr(stmtStart, i - stmtStart);
      std::smatch m;
      std::string withBrace = before + "{";
      if (before.find("Vertex") != std::string::npos && std::regex_search(withBrace, m, head) &&
          m.suffix().length() == 0) {
        std::size_t end = skipBlock(src, i);
        std::string body = src.substr(i + 1, end - i - 2);
        std::string q = prefix() + m[3].str();
        auto fields = parseMembers(body);
        if (m[1].matched) {
          templateFields[q] = fields;
        } else {
          ParsedVertex v;
          v.qualifiedName = q;
          v.cppName = "::" + q;
          v.fields = fields;
          out.push_back(v);
        }
        i = end - 1;
        stmtStart = end;
        continue;
      }
      std::smatch n;
      std::string tb = trim(before);
      if (std::regex_search(tb, n, nsHead)) {
        nsStack.push_back(n[1].matched ? n[1].str() : std::string());
        isNs.push_back(true);
      } else {
        nsStack.push_back("");
        isNs.push_back(false);
      }
      stmtStart = i + 1;
    }
  }
  return out;
}

std::string commonFlags() {
  return "-std=c++17 -O2 -fPIC -D__POPC__ -I" + quote(includeDir());
}

} // namespace

std::string includeDir() {
  Dl_info info;
  if (::dladdr(reinterpret_cast<void *>(&includeDir), &info) && info.dli_fname) {
    std::string lib = info.dli_fname;
    std::string dir = lib.substr(0, lib.find_last_of('/'));
    std::string inc = dir + "/../include";
    if (fileExists(inc + "/poplar/Vertex.hpp")) return inc;
  }
  return IPUXL_POPLAR_SOURCE_INCLUDE_DIR;
}

void compileCodeletObject(const std::string &srcIn, const std::string &out, const std::string &flags) {
  std::string src = absolutePath(srcIn);
  if (!fileExists(src)) throw graph_object_load_error("addCodelets: codelet source '" + srcIn + "' not found");
  std::string output;
  std::string pre = compiler() + " -E -P " + commonFlags() + " " + flags + " -x c++ " + quote(src);
  std::string preprocessed;
  if (runCommand(pre, preprocessed) != 0)
    throw graph_program_compilation_error("Failed to compile codelets '" + srcIn + "':\n" + preprocessed);
  auto vertices = parseVertices(preprocessed);
  std::ostringstream shim;
  shim << "#include " << '"' << src << '"' << "\n#include <poplar/Vertex.hpp>\n#include <vector>\n"
       << "extern \"C\" void ipuxl_codelet_types(std::vector<poplar::ipuxl_detail::VertexTypeInfo> *out) {\n"
       << "  using namespace poplar::ipuxl_detail;\n";
  for (const auto &v : vertices) {
    shim << "  out->push_back(describe<" << v.cppName << ">(\"" << v.qualifiedName << "\", {";
    for (std::size_t k = 0; k < v.fields.size(); ++k)
      shim << (k ? ", " : "") << "field(\"" << v.fields[k] << "\", &" << v.cppName << "::" << v.fields[k] << ")";
    shim << "}));\n";
  }
  shim << "}\n";
  std::string shimPath = out + ".shim.cpp";
  {
    std::ofstream f(shimPath);
    f << shim.str();
  }
  std::string tmp = out + ".tmp" + std::to_string(::getpid());
  std::string cmd = compiler() + " " + commonFlags() + " -shared " + flags + " " + quote(shimPath) + " -o " + quote(tmp);
  int rc = runCommand(cmd, output);
  ::unlink(shimPath.c_str());
  if (rc != 0) {
    ::unlink(tmp.c_str());
    throw graph_program_compilation_error("Failed to compile codelets '" + srcIn + "':\n" + output);
  }
  if (std::rename(tmp.c_str(), out.c_str()) != 0)
    throw graph_object_load_error("addCodelets: cannot write '" + out + "'");
}

std::vector<VertexTypeInfo> loadCodeletObject(const std::string &path) {
  void *h = ::dlopen(absolutePath(path).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) throw graph_object_load_error("addCodelets: cannot load codelet object '" + path + "': " + ::dlerror());
  using Fn = void (*)(std::vector<VertexTypeInfo> *);
  auto fn = reinterpret_cast<Fn>(::dlsym(h, "ipuxl_codelet_types"));
  if (!fn)
    throw graph_object_load_error("addCodelets: '" + path +
                                  "' is not a codelet object made by ipuxl (compiled for the host by its popc or addCodelets)");
  std::vector<VertexTypeInfo> types;
  fn(&types); // the object stays loaded: the types' functions live in it
  return types;
}

} // namespace ipuxl_detail

using namespace ipuxl_detail;

namespace {
bool isElf(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  char m[4] = {0, 0, 0, 0};
  f.read(m, 4);
  return f.gcount() == 4 && m[0] == 0x7f && m[1] == 'E' && m[2] == 'L' && m[3] == 'F';
}
std::string endsWith(const std::string &s, const std::vector<std::string> &exts) {
  for (const auto &e : exts)
    if (s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0) return e;
  return "";
}
} // namespace

bool Graph::addCodelets(StringRef src, CodeletFileType type, StringRef compileFlags, StringRef) {
  std::string path = src;
  if (!fileExists(path)) throw graph_object_load_error("addCodelets: codelet file '" + path + "' not found");
  std::vector<VertexTypeInfo> types;
  if (type == CodeletFileType::Object || isElf(path)) {
    types = loadCodeletObject(path);
  } else if (type == CodeletFileType::AsmSource || type == CodeletFileType::PreprocessedAsmSource ||
             !endsWith(path, {".S", ".s", ".asm"}).empty()) {
    throw graph_object_load_error("addCodelets: '" + path + "' is assembly for the IPU; ipuxl's Poplar compiles "
                                  "C++ codelets for the host and cannot run IPU assembly (that needs the Poplar SDK)");
  } else if (!endsWith(path, {".gp", ".o", ".elf"}).empty()) {
    throw graph_object_load_error("addCodelets: '" + path + "' is not a codelet object made by ipuxl's popc "
                                  "(an object compiled for the IPU by the SDK's popc cannot run here)");
  } else {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    // The key holds the codelet API headers too: an object built against
    // other headers (another ipuxl version) is never reused.
    std::string api;
    for (const char *h : {"/poplar/Vertex.hpp", "/poplar/VertexRegistry.hpp", "/poplar/HalfFloat.hpp"}) {
      std::ifstream hf(includeDir() + h);
      std::stringstream hs;
      hs << hf.rdbuf();
      api += hs.str();
    }
    std::string key = ss.str() + "\n//flags:" + std::string(compileFlags) + "\n//inc:" + includeDir() + "\n//api:" + api;
    std::size_t h = std::hash<std::string>()(key);
    char name[64];
    std::snprintf(name, sizeof name, "/codelet-%016zx.so", h);
    std::string obj = cacheDir() + name;
    // The cache is keyed by the file's own text: a header of the user's it
    // includes that changed is not seen (clear ~/.cache/ipuxl/poplar-codelets then).
    if (!fileExists(obj)) compileCodeletObject(path, obj, compileFlags);
    types = loadCodeletObject(obj);
  }
  impl_->codeletSources.push_back(path);
  return impl_->addVertexTypes(types) > 0;
}

void Graph::addCodelets(ArrayRef<std::string> xs, StringRef flags) {
  for (const auto &x : xs) addCodelets(x, CodeletFileType::Auto, flags);
}

void Graph::addCodelets(std::stringstream &stream, StringRef flags, CodeletFileType, StringRef) {
  std::string text = stream.str();
  std::size_t h = std::hash<std::string>()(text);
  char name[64];
  std::snprintf(name, sizeof name, "/stream-%016zx.cpp", h);
  std::string path = cacheDir() + name;
  {
    std::ofstream f(path);
    f << text;
  }
  addCodelets(StringRef(path), CodeletFileType::CppSource, flags);
}

} // namespace poplar

/// For ipuxl's popc: compiles `src` into the codelet object `out`.
extern "C" int ipuxl_popc_compile(const char *src, const char *out, const char *flags, char *err, unsigned errLen) {
  try {
    poplar::ipuxl_detail::compileCodeletObject(src, out, flags ? flags : "");
    return 0;
  } catch (const std::exception &e) {
    std::snprintf(err, errLen, "%s", e.what());
    return 1;
  }
}

// tests/io/output_file.cpp — what writing a file does to what is already there
// (host/output_file.hpp): a regular file replaced whole, keeping its mode; a symbolic link
// followed; a FIFO, a device, a directory, a socket refused for a durable file, and a FIFO or
// device written through for a text; a read-only directory and a full file system failing with
// the reason and leaving no temporary file. Each case looks at the directory afterwards: what
// is there, byte for byte, is what should be.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>

#include "spmd/host/output_file.hpp"
#include "../common/throws.hpp"

namespace {

using spmd::host::atomic_file;
using spmd::host::file_error;
using spmd::host::write_text;
using spmd_test::contains;
using spmd_test::message;

/// A fresh directory under /tmp, removed with everything in it at the end of a test.
struct scratch {
  std::string dir;
  scratch() {
    char t[] = "/tmp/spmd_output_XXXXXX";
    REQUIRE(::mkdtemp(t) != nullptr);
    dir = t;
  }
  ~scratch() { std::system(("chmod -R u+w " + dir + " 2>/dev/null; rm -rf " + dir).c_str()); }
  std::string at(const char* name) const { return dir + "/" + name; }
  /// The names in the directory, sorted.
  std::set<std::string> names() const {
    std::set<std::string> out;
    DIR* d = ::opendir(dir.c_str());
    REQUIRE(d != nullptr);
    while (dirent* e = ::readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") out.insert(e->d_name);
    ::closedir(d);
    return out;
  }
};

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void write_plain(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}
mode_t kind_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & S_IFMT;
}

/// A durable write of `bytes` to `path` the way a checkpoint is written.
void save(const std::string& path, const std::string& bytes) {
  atomic_file f = atomic_file::create(path, static_cast<spmd::index_t>(bytes.size()));
  f.write(bytes.data(), bytes.size(), 0);
  f.commit();
}

/// Runs f in a child process with a mount namespace of its own in which `dir` is a tmpfs of
/// `kib` KiB (read-only when asked). Returns f's exit code, or -1 when this machine does not
/// let the test mount one (not root, or no CAP_SYS_ADMIN).
template <class F>
int in_tmpfs(const std::string& dir, int kib, bool read_only, F&& f) {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (::unshare(CLONE_NEWNS) != 0 || ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ::_exit(77);
    const std::string size = "size=" + std::to_string(kib) + "k";
    if (::mount("tmpfs", dir.c_str(), "tmpfs", read_only ? MS_RDONLY : 0, size.c_str()) != 0) ::_exit(77);
    ::_exit(f());
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status) == 77 ? -1 : WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("a regular file is replaced whole, keeping its mode; a new name is created", "[io][output]") {
  scratch s;
  const std::string p = s.at("model.safetensors");
  save(p, "first");
  CHECK(read_all(p) == "first");
  REQUIRE(::chmod(p.c_str(), 0600) == 0);
  save(p, "second, longer");
  CHECK(read_all(p) == "second, longer");
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(s.names() == std::set<std::string>{"model.safetensors"});  // no temporary file left
  write_text(s.at("plan.svg"), "<svg/>");
  CHECK(read_all(s.at("plan.svg")) == "<svg/>");
}

TEST_CASE("a symbolic link to a regular file is followed; a link to nothing is refused", "[io][output]") {
  scratch s;
  write_plain(s.at("real"), "old");
  REQUIRE(::symlink("real", s.at("link").c_str()) == 0);  // relative, as ln -s makes it
  save(s.at("link"), "new");
  CHECK(kind_of(s.at("link")) == S_IFLNK);  // still a link
  CHECK(read_all(s.at("real")) == "new");   // to the file it named, replaced
  write_text(s.at("link"), "text");
  CHECK(kind_of(s.at("link")) == S_IFLNK);
  CHECK(read_all(s.at("real")) == "text");
  CHECK(s.names() == std::set<std::string>{"link", "real"});

  REQUIRE(::symlink("nowhere", s.at("dangling").c_str()) == 0);
  const std::string m = message<file_error>([&] { save(s.at("dangling"), "x"); });
  CHECK(contains(m, s.at("dangling") + ": is a symbolic link to a file that does not exist"));
  CHECK(kind_of(s.at("dangling")) == S_IFLNK);
  CHECK(s.names() == std::set<std::string>{"dangling", "link", "real"});
}

TEST_CASE("a FIFO is refused for a durable file and written through for a text", "[io][output]") {
  scratch s;
  const std::string fifo = s.at("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  const std::string m = message<file_error>([&] { save(fifo, "bytes"); });
  CHECK(contains(m, fifo + ": is a FIFO, not a regular file; spmd replaces only a regular file"));
  CHECK(kind_of(fifo) == S_IFIFO);  // not replaced
  CHECK(s.names() == std::set<std::string>{"fifo"});

  // A reader at the other end receives the text, as `cat fifo` would.
  std::string got;
  std::thread reader([&] { got = read_all(fifo); });
  write_text(fifo, "<svg>through</svg>");
  reader.join();
  CHECK(got == "<svg>through</svg>");
  CHECK(kind_of(fifo) == S_IFIFO);
  CHECK(s.names() == std::set<std::string>{"fifo"});
}

TEST_CASE("a character device is refused for a durable file and written through for a text", "[io][output]") {
  // /dev/full: the device the issue found replaced by a regular file when run as root.
  struct stat before {};
  REQUIRE(::stat("/dev/full", &before) == 0);
  REQUIRE(S_ISCHR(before.st_mode));
  const std::string m = message<file_error>([&] { save("/dev/full", "bytes"); });
  CHECK(contains(m, "/dev/full: is a character device, not a regular file"));
  // Written through, the device says it is full: the reason, not a silent success.
  const std::string w = message<file_error>([&] { write_text("/dev/full", "text"); });
  CHECK(contains(w, "/dev/full: write failed: No space left on device"));
  write_text("/dev/null", "discarded");
  struct stat after {};
  REQUIRE(::stat("/dev/full", &after) == 0);
  CHECK(S_ISCHR(after.st_mode));
  CHECK(after.st_rdev == before.st_rdev);
  CHECK(::access("/dev/full.tmp", F_OK) != 0);
}

TEST_CASE("this process's descriptors by name: /dev/fd/N and /dev/stdout are written in place", "[io][output]") {
  scratch s;
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  write_text("/dev/fd/" + std::to_string(pipe_fds[1]), "through the pipe");
  ::close(pipe_fds[1]);
  char buf[64] = {};
  const ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
  ::close(pipe_fds[0]);
  CHECK(std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0) == "through the pipe");
  // Never a durable file: stdout may be a log that replacing would lose.
  CHECK(contains(message<file_error>([&] { save("/dev/stdout", "x"); }), "/dev/stdout: is one of this process's descriptors, not a regular file"));
  // A descriptor this process does not have is named, not created as a file.
  CHECK(contains(message<file_error>([&] { write_text("/dev/fd/999", "x"); }),
                 "/dev/fd/999: this process has no such open descriptor"));
  // /dev/stdout redirected to a regular file: the text lands after what was written there,
  // and the file is not replaced (as `cmd > log` with a trace to /dev/stdout).
  const std::string log = s.at("stdout.log");
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ::dup2(fd, 1) < 0) ::_exit(3);
    if (::write(1, "before\n", 7) != 7) ::_exit(4);
    try {
      write_text("/dev/stdout", "trace\n");
    } catch (...) {
      ::_exit(5);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(read_all(log) == "before\ntrace\n");
}

TEST_CASE("a directory, a socket, a missing folder, an empty name: refused, naming the path", "[io][output]") {
  scratch s;
  REQUIRE(::mkdir(s.at("sub").c_str(), 0755) == 0);
  CHECK(contains(message<file_error>([&] { save(s.at("sub"), "x"); }), s.at("sub") + ": is a directory; name a file"));
  CHECK(contains(message<file_error>([&] { write_text(s.at("sub"), "x"); }), s.at("sub") + ": is a directory"));
  CHECK(contains(message<file_error>([&] { save(s.at("none/x.safetensors"), "x"); }),
                 s.at("none/x.safetensors") + ": the directory " + s.at("none") + " does not exist"));
  CHECK(contains(message<file_error>([&] { save("", "x"); }), "empty name"));

  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(sock >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sp = s.at("sock");
  REQUIRE(sp.size() < sizeof addr.sun_path);
  std::strcpy(addr.sun_path, sp.c_str());
  REQUIRE(::bind(sock, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
  CHECK(contains(message<file_error>([&] { save(sp, "x"); }), sp + ": is a socket, not a regular file"));
  CHECK(contains(message<file_error>([&] { write_text(sp, "x"); }), sp + ": is a socket"));
  ::close(sock);
  CHECK(kind_of(sp) == S_IFSOCK);
  CHECK(s.names() == std::set<std::string>{"sock", "sub"});
}

TEST_CASE("a temporary name held by something else is left alone", "[io][output]") {
  scratch s;
  REQUIRE(::mkfifo(s.at("x.safetensors.tmp").c_str(), 0644) == 0);
  CHECK(contains(message<file_error>([&] { save(s.at("x.safetensors"), "x"); }),
                 "x.safetensors.tmp: is there and is not a regular file"));
  CHECK(kind_of(s.at("x.safetensors.tmp")) == S_IFIFO);
  CHECK(s.names() == std::set<std::string>{"x.safetensors.tmp"});
}

TEST_CASE("a write that fails half-way, and a file abandoned before commit, leave no temporary file", "[io][output]") {
  scratch s;
  const std::string p = s.at("ck.safetensors");
  save(p, "previous");
  {
    atomic_file f = atomic_file::create(p, 16);
    f.write("half", 4, 0);
    CHECK(s.names() == std::set<std::string>{"ck.safetensors", "ck.safetensors.tmp"});
  }  // an exception elsewhere ends the save here
  CHECK(s.names() == std::set<std::string>{"ck.safetensors"});
  CHECK(read_all(p) == "previous");
  // A process that wrote its part of a file another commits keeps it once released.
  {
    atomic_file owner = atomic_file::create(p, 4);
    atomic_file other = atomic_file::open_existing(p);
    other.write("ab", 2, 2);
    other.release();
    owner.write("cd", 2, 0);
    owner.commit();
  }
  CHECK(read_all(p) == "cdab");
  CHECK(s.names() == std::set<std::string>{"ck.safetensors"});
}

TEST_CASE("a read-only directory: the reason, nothing left", "[io][output]") {
  scratch s;
  REQUIRE(::mkdir(s.at("ro").c_str(), 0755) == 0);
  const std::string p = s.at("ro/ck.safetensors");
  if (::geteuid() != 0) {  // permissions apply
    REQUIRE(::chmod(s.at("ro").c_str(), 0555) == 0);
    CHECK(contains(message<file_error>([&] { save(p, "x"); }), p + ".tmp: cannot create: Permission denied"));
    CHECK(contains(message<file_error>([&] { write_text(p, "x"); }), "Permission denied"));
    CHECK(::access(p.c_str(), F_OK) != 0);
    CHECK(::access((p + ".tmp").c_str(), F_OK) != 0);
    return;
  }
  // root writes through permissions: a read-only mount is what stops it.
  const int rc = in_tmpfs(s.at("ro"), 64, true, [&] {
    const std::string m = message<file_error>([&] { save(p, "x"); });
    const std::string t = message<file_error>([&] { write_text(p, "x"); });
    if (!contains(m, p + ".tmp: cannot create: Read-only file system")) return 1;
    if (!contains(t, "Read-only file system")) return 2;
    return ::access(p.c_str(), F_OK) != 0 && ::access((p + ".tmp").c_str(), F_OK) != 0 ? 0 : 3;
  });
  if (rc < 0) WARN("skipped: this process may not mount a read-only tmpfs (needs CAP_SYS_ADMIN)");
  else CHECK(rc == 0);
}

TEST_CASE("a full file system: 'No space left on device', the previous file whole, no temporary file", "[io][output]") {
  scratch s;
  REQUIRE(::mkdir(s.at("small").c_str(), 0755) == 0);
  const std::string p = s.at("small/ck.safetensors");
  const int rc = in_tmpfs(s.at("small"), 64, false, [&] {
    try {
      save(p, std::string(16 * 1024, 'a'));  // fits
    } catch (...) {
      return 1;
    }
    // ftruncate reserves nothing on tmpfs: the write itself finds the disk full.
    const std::string m = message<file_error>([&] { save(p, std::string(256 * 1024, 'b')); });
    if (!contains(m, p + ".tmp: write failed: No space left on device")) return 2;
    if (read_all(p) != std::string(16 * 1024, 'a')) return 3;
    if (::access((p + ".tmp").c_str(), F_OK) == 0) return 4;
    const std::string t = message<file_error>([&] { write_text(p, std::string(256 * 1024, 'c')); });
    if (!contains(t, "No space left on device")) return 5;
    if (read_all(p) != std::string(16 * 1024, 'a')) return 6;
    return ::access((p + ".tmp").c_str(), F_OK) != 0 ? 0 : 7;
  });
  if (rc < 0) WARN("skipped: this process may not mount a small tmpfs (needs CAP_SYS_ADMIN)");
  else CHECK(rc == 0);
}

// spmd/host/output_file.hpp — every file spmd writes goes through here: where the bytes go,
// what is refused, and how a file is replaced without ever leaving half of one behind.
//
//   host::atomic_file f = host::atomic_file::create("model.safetensors", bytes);  // "model.safetensors.tmp"
//   f.write(data, n, at);  ...  f.commit();        // fsync, rename over the name, fsync the folder
//
//   host::write_text("plan.svg", text);            // an SVG, a trace: the same, or in place
//
// Two kinds of output (docs/files.md):
//   - a durable file (checkpoints, saved parameters: write_use::file) is written under a
//     temporary name beside its target, synced, renamed over it, and the folder synced: once
//     commit() returns, a power loss finds the new file under the name, and before it the old
//     one. Only a regular file or a new name can be its target; a directory, a FIFO, a device,
//     a socket is refused (renaming over /dev/full would replace the device node);
//   - a text (SVG pictures, traces: write_use::stream) is written the same way to a regular
//     file or a new name, and *through*, in place, to what a user means as a stream: /dev/stdout,
//     /dev/stderr, /dev/fd/N (this process's descriptor N), a FIFO, a character device
//     (/dev/null, a terminal). A directory, a socket or a block device is refused.
// A symbolic link is followed, as cp does: the file it names is replaced and the link stays; a
// link to nothing is refused (cp refuses it too). Every refusal and failure is a
// host::file_error naming the file and the reason; a failed write removes its temporary file.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

#include "spmd/core/config.hpp"
#include "spmd/host/text_out.hpp"

namespace spmd::host {

/// A file that cannot be read or written as asked: names the file and the reason.
struct file_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// What a written file is for: a durable file (a regular file, replaced whole) or a stream
/// (also written through a FIFO, a character device or one of this process's descriptors).
enum class write_use { file, stream };

/// Where the bytes for a name go, decided before anything is written.
struct write_target {
  std::string path;  // the file replaced (symbolic links followed) or opened in place
  int fd = -1;       // >= 0: this process's descriptor, written in place (/dev/stdout)
  bool in_place = false;  // a FIFO or character device: opened and written through
  bool exists = false;    // a regular file is there (its mode is kept)
  mode_t mode = 0644;
};

/// The folder a path's file is in ("." for a bare name).
inline std::string folder_of(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

namespace detail {

/// Throws file_error "<path>: <what>[<more>]", and ": <the reason for errno err>" when err is
/// not 0. Out of line and built by text_out's calls (text_out.hpp says why): every unit that
/// can write a trace compiles these messages.
[[noreturn, gnu::cold, gnu::noinline]] inline void fail(std::string_view path, std::string_view what, int err = 0,
                                                        std::string_view more = {}, std::string_view end = {}) {
  text_out t;
  t << path << ": " << what << more << end;
  if (err != 0) t << ": " << std::strerror(err);
  throw file_error(std::move(t).str());
}

/// "a FIFO", "a directory": what a non-regular file is, for a message.
inline const char* file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

/// N for "/dev/stdout" (1), "/dev/stderr" (2), "/dev/fd/N", "/proc/self/fd/N"; -1 otherwise.
inline int descriptor_name(std::string_view path) {
  if (path == "/dev/stdout") return 1;
  if (path == "/dev/stderr") return 2;
  for (std::string_view prefix : {std::string_view("/dev/fd/"), std::string_view("/proc/self/fd/")}) {
    if (path.substr(0, prefix.size()) != prefix) continue;
    const std::string_view n = path.substr(prefix.size());
    if (n.empty() || n.size() > 6 || n.find_first_not_of("0123456789") != std::string_view::npos) return -1;
    return std::atoi(std::string(n).c_str());
  }
  return -1;
}

/// Writes all n bytes to fd at its position, or returns errno.
inline int write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return 0;
}

}  // namespace detail

/// Where writing `path` for `use` goes; throws file_error naming the path when it must not
/// be written: an empty name, a missing folder, a directory, a link to nothing, a target that
/// is not a regular file (for a file; for a stream, a directory, socket or block device).
[[gnu::cold]] inline write_target resolve_output(const std::string& path, write_use use) {
  if (path.empty()) throw file_error("cannot write a file with an empty name");
  write_target t;
  t.path = path;
  if (const int fd = detail::descriptor_name(path); fd >= 0) {
    // Its target may be a regular file (stdout redirected to a log): replacing that would
    // lose the log, so a durable file never goes there.
    if (use == write_use::file)
      detail::fail(path, "is one of this process's descriptors, not a regular file; spmd replaces only a regular file "
                         "(name one, or a new file)");
    if (::fcntl(fd, F_GETFD) < 0) detail::fail(path, "this process has no such open descriptor");
    t.fd = fd;
    t.in_place = true;
    return t;
  }
  struct stat link {};
  if (::lstat(path.c_str(), &link) != 0) {
    if (errno != ENOENT) detail::fail(path, "cannot look at it", errno);
    // A new name: its folder must be there (the message a user can act on, not ENOENT).
    const std::string dir = folder_of(path);
    struct stat d {};
    if (::stat(dir.c_str(), &d) != 0) detail::fail(path, "the directory ", 0, dir, " does not exist");
    if (!S_ISDIR(d.st_mode)) detail::fail(path, dir, 0, " is not a directory");
    return t;
  }
  struct stat st = link;
  if (S_ISLNK(link.st_mode)) {
    if (::stat(path.c_str(), &st) != 0)
      detail::fail(path, "is a symbolic link to a file that does not exist (not written through, as cp does not)");
    char real[PATH_MAX];
    if (!::realpath(path.c_str(), real)) detail::fail(path, "cannot follow the symbolic link", errno);
    t.path = real;
  }
  if (S_ISREG(st.st_mode)) {
    t.exists = true;
    t.mode = st.st_mode & 07777;
    return t;
  }
  if (S_ISDIR(st.st_mode)) detail::fail(path, "is a directory; name a file");
  if (use == write_use::stream && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))) {
    t.in_place = true;
    return t;
  }
  detail::fail(path, std::string("is ") + detail::file_kind(st.st_mode), 0,
               use == write_use::file ? ", not a regular file; spmd replaces only a regular file (name one, or a new file)"
                                      : "; spmd writes a text to a regular file, a FIFO or a character device");
}

/// Syncs the folder `dir`: after a rename in it, the new name is on the disk. A file system
/// that cannot sync a folder (EINVAL: some network and FUSE ones) is taken as done.
inline void sync_folder(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) detail::fail(dir, "cannot open the directory to sync it", errno);
  const int rc = ::fsync(fd);
  const int e = errno;
  ::close(fd);
  if (rc != 0 && e != EINVAL) detail::fail(dir, "cannot sync the directory", e);
}

/// A file written under a temporary name (its target's name + ".tmp", beside it) and renamed
/// over the target only when commit() has synced it; the folder is synced after the rename.
/// A crash before then leaves the previous file whole; any failure, and a destructor before
/// commit(), removes the temporary file. Several processes may write disjoint ranges of one:
/// create() on one, open_existing() on the others, which release() theirs once it is committed.
class atomic_file {
 public:
  /// Creates (or truncates) the temporary file at its final size; refuses a target that is
  /// not a regular file (resolve_output).
  static atomic_file create(const std::string& path, index_t bytes) {
    atomic_file f(resolve_output(path, write_use::file), path);
    // O_NOFOLLOW: a link planted under the temporary name is not written through.
    f.fd_ = ::open(f.tmp_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (f.fd_ < 0) detail::fail(f.tmp_, "cannot create", errno);
    f.owns_tmp_ = true;
    f.check_regular();
    // The replaced file's permissions carry over, as cp's do.
    if (f.target_.exists && ::fchmod(f.fd_, f.target_.mode) != 0)
      f.fail("cannot set its mode", errno);
    if (::ftruncate(f.fd_, static_cast<off_t>(bytes)) != 0)
      f.fail("cannot size it to the file's bytes", errno);
    return f;
  }
  /// Opens the temporary file another process created (same target, same name).
  static atomic_file open_existing(const std::string& path) {
    atomic_file f(resolve_output(path, write_use::file), path);
    f.fd_ = ::open(f.tmp_.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (f.fd_ < 0) detail::fail(f.tmp_, "cannot open", errno);
    f.owns_tmp_ = true;
    f.check_regular();
    return f;
  }
  atomic_file(atomic_file&& o) noexcept
      : target_(std::move(o.target_)), name_(std::move(o.name_)), tmp_(std::move(o.tmp_)), fd_(o.fd_), owns_tmp_(o.owns_tmp_) {
    o.fd_ = -1;
    o.owns_tmp_ = false;
  }
  atomic_file(const atomic_file&) = delete;
  atomic_file& operator=(const atomic_file&) = delete;
  ~atomic_file() { discard(); }

  void write(const void* p, std::size_t n, index_t at) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      const ssize_t w = ::pwrite(fd_, c, n, static_cast<off_t>(at));
      if (w < 0) {
        if (errno == EINTR) continue;
        fail("write failed", errno);
      }
      c += w;
      n -= static_cast<std::size_t>(w);
      at += w;
    }
  }
  /// Flushes this process's writes to the disk.
  void sync() {
    if (::fsync(fd_) != 0) fail("fsync failed", errno);
  }
  /// sync(), then the temporary file replaces the target and the folder is synced (one
  /// process, after every writer synced). When it returns, the file is durable.
  void commit() {
    sync();
    if (::close(fd_) != 0) {
      fd_ = -1;
      fail("close failed", errno);
    }
    fd_ = -1;
    if (::rename(tmp_.c_str(), target_.path.c_str()) != 0)
      fail("cannot rename the written file over it", errno, name_);
    owns_tmp_ = false;
    sync_folder(folder_of(target_.path));
  }
  /// For a process that wrote into a file another commits: done, its temporary file is no
  /// longer this process's to remove.
  void release() {
    owns_tmp_ = false;
    discard();
  }
  const std::string& temporary_path() const { return tmp_; }

 private:
  atomic_file(write_target t, const std::string& name) : target_(std::move(t)), name_(name), tmp_(target_.path + ".tmp") {}
  void check_regular() {
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      owns_tmp_ = false;  // not a file of ours: left where it is
      fail("is there and is not a regular file; remove it or write elsewhere");
    }
  }
  /// Closes and removes the temporary file (when this process owns it).
  void discard() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (owns_tmp_) ::unlink(tmp_.c_str());
    owns_tmp_ = false;
  }
  /// Removes the temporary file, then throws "<tmp>: <what>[: reason]" (or names `path`).
  [[noreturn, gnu::cold, gnu::noinline]] void fail(const char* what, int err = 0, std::string_view path = {}) {
    const std::string at = path.empty() ? tmp_ : std::string(path);
    discard();
    detail::fail(at, what, err);
  }

  write_target target_;
  std::string name_, tmp_;
  int fd_ = -1;
  bool owns_tmp_ = false;
};

/// Writes `text` as the whole of `path` (write_use::stream): a regular file or a new name
/// replaced atomically, a FIFO, a character device or /dev/stdout written through in place.
/// Throws file_error naming the path on a refusal or failure; nothing partial is left.
[[gnu::cold]] inline void write_text(const std::string& path, std::string_view text) {
  const write_target t = resolve_output(path, write_use::stream);
  if (t.in_place) {
    // What the program printed through stdio comes first on a shared descriptor (/dev/stdout).
    if (t.fd >= 0) std::fflush(nullptr);
    const bool own = t.fd < 0;
    const int fd = own ? ::open(t.path.c_str(), O_WRONLY | O_CLOEXEC) : t.fd;
    if (fd < 0) detail::fail(path, "cannot open", errno);
    const int e = detail::write_all(fd, text.data(), text.size());
    const int c = own && ::close(fd) != 0 ? errno : 0;
    if (e != 0 || c != 0) detail::fail(path, "write failed", e ? e : c);
    return;
  }
  atomic_file f = atomic_file::create(path, 0);
  f.write(text.data(), text.size(), 0);
  f.commit();
}

}  // namespace spmd::host

/* pty: runs a command on a pseudo-terminal and types a file into it, for
   the specs of the interactive loop (line editing, completion, history).

     pty INPUT COMMAND [ARGS...]

   The input is typed in pieces: each piece ends after a newline, a tab or
   an escape sequence (ESC [ X), and the next is typed once the command has
   been quiet for 150 ms, so readline sees keys as a person types them.
   Everything the command writes to the terminal goes to stdout. Exits with
   the command's status; kills it after 20 s. */
#define _XOPEN_SOURCE 600
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Copies what the command writes until it has been quiet for ms (or the
   terminal closed: returns 0). */
static int drain(int fd, int ms) {
  char buf[4096];
  for (;;) {
    struct pollfd p = { fd, POLLIN, 0 };
    int r = poll(&p, 1, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 1;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return 0; /* EIO: the command closed the terminal */
    fwrite(buf, 1, (size_t)n, stdout);
    fflush(stdout);
  }
}

static size_t piece(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '\n' || s[i] == '\t') return i + 1;
    if (s[i] == '\033' && i + 2 < n && s[i + 1] == '[') return i + 3;
  }
  return n;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: pty INPUT COMMAND [ARGS...]\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 2;
  }
  static char in[1 << 16];
  size_t len = fread(in, 1, sizeof in, f);
  fclose(f);
  int m = posix_openpt(O_RDWR | O_NOCTTY);
  if (m < 0 || grantpt(m) || unlockpt(m)) {
    perror("pty");
    return 2;
  }
  const char *name = ptsname(m);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    return 2;
  }
  if (pid == 0) {
    setsid();
    int s = open(name, O_RDWR); /* becomes the controlling terminal */
    if (s < 0) _exit(127);
    dup2(s, 0);
    dup2(s, 1);
    dup2(s, 2);
    if (s > 2) close(s);
    close(m);
    execvp(argv[2], argv + 2);
    _exit(127);
  }
  double start = now();
  int open_ = drain(m, 500);
  for (size_t at = 0; open_ && at < len && now() - start < 20;) {
    size_t n = piece(in + at, len - at);
    if (write(m, in + at, n) != (ssize_t)n) break;
    at += n;
    open_ = drain(m, 150);
  }
  while (open_ && now() - start < 20) open_ = drain(m, 100);
  int status = 0;
  if (waitpid(pid, &status, WNOHANG) == 0) {
    if (open_) kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  close(m);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

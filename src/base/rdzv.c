/* The TCP rendezvous (base/rdzv.h). A hello (HELLO bytes) says the job,
   the rank and the world size; rank 0 answers each hello with a reply
   (REPLY bytes: "ok" and its job, then the blob; or "no" and why) once all
   have come, or when it gives up. Sockets are non-blocking; every wait is
   a poll bounded by the deadline and resumed after EINTR. */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/rdzv.h"
#include "base/world.h"

#define MAGIC "cugraph-lua rendezvous 1\n"
enum { HELLO = 256, REPLY = 512, STRAYS = 64 };


static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Milliseconds to the deadline for poll: 0 once it has passed. */
static int ms_left(double deadline) {
  double left = deadline - now();
  if (left <= 0) return 0;
  return left > 86400 ? 86400000 : (int)(left * 1000) + 1;
}

static void nap(double s) {
  struct timespec t = {0, (long)(s * 1e9)};
  nanosleep(&t, NULL); /* EINTR: a shorter nap, the loop goes on */
}

/* Waits for events on fd until the deadline: 1 ready, 0 timed out, -1. */
static int wait_fd(int fd, short events, double deadline) {
  for (;;) {
    int left = ms_left(deadline);
    if (!left) return 0;
    struct pollfd p = {fd, events, 0};
    int r = poll(&p, 1, left);
    if (r > 0) return 1;
    if (r < 0 && errno != EINTR) return -1;
  }
}

/* All n bytes of buf sent before the deadline: 0, or -1 with errno. */
static int send_all(int fd, const char *buf, size_t n, double deadline) {
  while (n) {
    ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);
    if (w > 0) {
      buf += w;
      n -= (size_t)w;
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int r = wait_fd(fd, POLLOUT, deadline);
      if (r <= 0) {
        if (!r) errno = ETIMEDOUT;
        return -1;
      }
    } else {
      return -1;
    }
  }
  return 0;
}

/* n bytes into buf before the deadline: n; fewer at the end of the stream;
   -1 with errno (ETIMEDOUT at the deadline). */
static ssize_t recv_all(int fd, char *buf, size_t n, double deadline) {
  size_t got = 0;
  while (got < n) {
    ssize_t k = recv(fd, buf + got, n - got, 0);
    if (k > 0) {
      got += (size_t)k;
    } else if (k == 0) {
      break;
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      int r = wait_fd(fd, POLLIN, deadline);
      if (r <= 0) {
        if (!r) errno = ETIMEDOUT;
        return -1;
      }
    } else {
      return -1;
    }
  }
  return (ssize_t)got;
}

int cg_rdzv_parse(const char *addr, char *host, size_t hn, char *port,
                  size_t pn, char *err, size_t en) {
  const char *h = addr, *colon;
  size_t hl;
  if (*addr == '[') { /* [v6]:port */
    const char *close = strchr(addr, ']');
    if (!close || close[1] != ':')
      return cg_failf(err, en, "'%s' is not [address]:port", addr);
    h = addr + 1;
    hl = (size_t)(close - h);
    colon = close + 1;
  } else {
    colon = strrchr(addr, ':');
    if (!colon) return cg_failf(err, en, "'%s' is not host:port", addr);
    hl = (size_t)(colon - addr);
    if (memchr(addr, ':', hl))
      return cg_failf(err, en, "'%s': write an IPv6 address in brackets, as "
                  "[::1]:29500", addr);
  }
  char *end;
  long p = strtol(colon + 1, &end, 10);
  if (!colon[1] || *end || p < 1 || p > 65535 || colon[1] == '+' ||
      colon[1] == '-')
    return cg_failf(err, en, "'%s': the port must be a number from 1 to 65535",
                addr);
  if (!hl) return cg_failf(err, en, "'%s' names no host", addr);
  if (hl >= hn) return cg_failf(err, en, "'%s': the host name is too long", addr);
  memcpy(host, h, hl);
  host[hl] = '\0';
  snprintf(port, pn, "%ld", p);
  return 0;
}

/* -- rank 0 --------------------------------------------------------------- */

typedef struct conn {
  int fd, rank;          /* rank 0: its hello is not yet whole */
  size_t got;
  char hello[HELLO];
} conn;

typedef struct server {
  const char *addr, *job;
  int size, arrived;     /* ranks in, rank 0 included */
  char *in;              /* in[r]: rank r said hello */
  conn *c;
  int nc, cap;
  int refused;
  char why[160];         /* the last peer refused, and why */
  int left;              /* the last rank that went away after its hello, or -1 */
} server;

static int listen_on(const char *host, const char *port, const char *addr,
                     int size, char *err, size_t en) {
  struct addrinfo hints, *ai, *a;
  memset(&hints, 0, sizeof hints);
  hints.ai_flags = AI_PASSIVE;
  hints.ai_socktype = SOCK_STREAM;
  int g = getaddrinfo(host, port, &hints, &ai);
  if (g)
    return cg_failf(err, en, "rank 0 cannot listen at %s: %s", addr,
                g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
  int fd = -1, why = 0, taken = 0;
  for (a = ai; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                a->ai_protocol);
    if (fd < 0) {
      why = errno;
      continue;
    }
    int one = 1; /* a port a run before left in TIME_WAIT is free */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 ||
        listen(fd, size < SOMAXCONN ? size + STRAYS : SOMAXCONN) != 0) {
      why = errno;
      taken |= why == EADDRINUSE;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(ai);
  if (fd >= 0) return fd;
  if (taken)
    return cg_failf(err, en, "rank 0 cannot listen at %s: the port is taken "
                "(another run or program uses it: give the job a port of its "
                "own)", addr);
  return cg_failf(err, en, "rank 0 cannot listen at %s: %s%s", addr,
              strerror(why), why == EADDRNOTAVAIL ? " (rank 0 listens at the "
              "host named: it must be rank 0's machine)" : "");
}

static void drop(server *s, int i) {
  close(s->c[i].fd);
  s->c[i] = s->c[--s->nc];
}

static void reply(int fd, const char *what, const char *blob, double deadline) {
  char buf[REPLY + CG_RDZV_BLOB];
  memset(buf, 0, REPLY);
  snprintf(buf, REPLY, MAGIC "%s\n", what);
  size_t n = REPLY;
  if (blob) {
    memcpy(buf + REPLY, blob, CG_RDZV_BLOB);
    n += CG_RDZV_BLOB;
  }
  send_all(fd, buf, n, deadline); /* a peer gone meanwhile fails on its own */
}

/* Takes the whole hello of connection i: its rank, or refuses it. */
static void hello(server *s, int i) {
  conn *c = &s->c[i];
  const char *p = c->hello + strlen(MAGIC), *job;
  int rank = -1, size = -1, len = 0;
  char why[400];
  int whole = !memcmp(c->hello, MAGIC, strlen(MAGIC)) && !c->hello[HELLO - 1]
              && sscanf(p, "rank %d size %d%n", &rank, &size, &len) == 2
              && !strncmp(p + len, "\njob ", 5);
  job = whole ? p + len + 5 : NULL;
  if (!job || !strchr(job, '\n')) {
    snprintf(why, sizeof why, "no rank 0 at %s took a message that is not "
             "cugraph-lua's rendezvous", s->addr);
    snprintf(s->why, sizeof s->why, "a peer that is not a cugraph-lua rank");
  } else if (strncmp(job, s->job, strlen(s->job)) ||
             job[strlen(s->job)] != '\n') {
    int jl = (int)(strchr(job, '\n') - job);
    snprintf(why, sizeof why, "no rank 0 at %s is of job '%s', rank %d of "
             "job '%.*s': a rank of another run (give each run a port of its "
             "own, and its ranks one job id)", s->addr, s->job, rank, jl, job);
    snprintf(s->why, sizeof s->why, "rank %d of job '%.*s'", rank, jl, job);
  } else if (size != s->size) {
    snprintf(why, sizeof why, "no rank 0 at %s has a world of %d ranks, rank "
             "%d one of %d", s->addr, s->size, rank, size);
    snprintf(s->why, sizeof s->why, "rank %d of a world of %d", rank, size);
  } else if (rank < 1 || rank >= s->size) {
    snprintf(why, sizeof why, "no rank 0 at %s: rank %d is not one of the "
             "others of %d ranks", s->addr, rank, s->size);
    snprintf(s->why, sizeof s->why, "a rank %d", rank);
  } else if (s->in[rank]) {
    snprintf(why, sizeof why, "no rank 0 at %s has a rank %d already: two "
             "processes were given rank %d", s->addr, rank, rank);
    snprintf(s->why, sizeof s->why, "a second rank %d", rank);
  } else {
    c->rank = rank;
    s->in[rank] = 1;
    s->arrived++;
    return;
  }
  reply(c->fd, why, NULL, now() + 1);
  s->refused++;
  drop(s, i);
}

/* Reads what connection i has: more of its hello, or (after its hello)
   the end of a rank that went away. */
static void readable(server *s, int i) {
  conn *c = &s->c[i];
  char byte;
  ssize_t k = c->rank ? recv(c->fd, &byte, 1, 0)
                      : recv(c->fd, c->hello + c->got, HELLO - c->got, 0);
  if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
    return;
  if (c->rank) { /* a rank says nothing after its hello: it left */
    s->in[c->rank] = 0;
    s->arrived--;
    s->left = c->rank;
    drop(s, i);
    return;
  }
  if (k <= 0) { /* a hello cut short */
    drop(s, i);
    return;
  }
  c->got += (size_t)k;
  if (c->got == HELLO) hello(s, i);
}

static void accept_all(server *s, int lfd) {
  for (;;) {
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      return; /* EAGAIN: none left; else the next poll says so again */
    }
    if (s->nc == s->cap) { /* more strays than room: not heard */
      close(fd);
      continue;
    }
    conn *c = &s->c[s->nc++];
    c->fd = fd;
    c->rank = 0;
    c->got = 0;
  }
}

/* The ranks not in yet, as "2, 5, 7" (the first few). */
static void missing(const server *s, char *out, size_t n) {
  size_t o = 0;
  int shown = 0;
  out[0] = '\0';
  for (int r = 1; r < s->size && o + 16 < n; r++)
    if (!s->in[r]) {
      if (shown++ == 8) {
        snprintf(out + o, n - o, ", ...");
        return;
      }
      o += (size_t)snprintf(out + o, n - o, "%s%d", shown > 1 ? ", " : "", r);
    }
}

static int serve(server *s, int lfd, double timeout, const char *blob,
                 char *err, size_t en) {
  struct pollfd *pf = malloc(((size_t)s->cap + 1) * sizeof *pf);
  if (!pf) return cg_failf(err, en, "rank 0: out of memory");
  double deadline = now() + timeout;
  int rc = -1;
  for (;;) {
    if (s->arrived == s->size) {
      char ok[CG_RDZV_BLOB];
      snprintf(ok, sizeof ok, "ok job %s", s->job);
      double end = now() + timeout;
      for (int i = 0; i < s->nc; i++)
        if (s->c[i].rank) reply(s->c[i].fd, ok, blob, end);
      rc = 0;
      break;
    }
    int left = ms_left(deadline);
    if (!left) {
      char miss[128], what[400], extra[240] = "";
      missing(s, miss, sizeof miss);
      if (s->refused)
        snprintf(extra, sizeof extra, "; refused %d peer%s (the last: %s)",
                 s->refused, s->refused > 1 ? "s" : "", s->why);
      if (s->left > 0)
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra),
                 "; rank %d went away after it came", s->left);
      snprintf(what, sizeof what, "no rank 0 at %s gave up after %g s: %d of "
               "%d ranks of job '%s' arrived (missing: %s)", s->addr, timeout,
               s->arrived, s->size, s->job, miss);
      for (int i = 0; i < s->nc; i++)
        if (s->c[i].rank) reply(s->c[i].fd, what, NULL, now() + 1);
      cg_failf(err, en, "rank 0 waited %g s at %s for the ranks of job '%s': %d "
           "of %d arrived (missing: %s)%s", timeout, s->addr, s->job,
           s->arrived, s->size, miss, extra);
      break;
    }
    pf[0].fd = lfd;
    pf[0].events = POLLIN;
    for (int i = 0; i < s->nc; i++) {
      pf[i + 1].fd = s->c[i].fd;
      pf[i + 1].events = POLLIN;
    }
    int n = s->nc, r = poll(pf, (nfds_t)n + 1, left);
    if (r < 0) {
      if (errno == EINTR) continue;
      cg_failf(err, en, "rank 0 at %s: poll: %s", s->addr, strerror(errno));
      break;
    }
    /* from the last: drop() moves the last connection into a seen slot */
    for (int i = n - 1; i >= 0; i--)
      if (pf[i + 1].revents) readable(s, i);
    if (pf[0].revents) accept_all(s, lfd);
  }
  free(pf);
  return rc;
}

static int serve_at(const char *host, const char *port, const char *addr,
                    const char *job, int size, double timeout,
                    const char *blob, char *err, size_t en) {
  int lfd = listen_on(host, port, addr, size, err, en);
  if (lfd < 0) return -1;
  server s;
  memset(&s, 0, sizeof s);
  s.addr = addr;
  s.job = job;
  s.size = size;
  s.arrived = 1;
  s.left = -1;
  s.cap = size - 1 + STRAYS;
  s.in = calloc((size_t)size, 1);
  s.c = calloc((size_t)s.cap, sizeof *s.c);
  int rc = s.in && s.c ? serve(&s, lfd, timeout, blob, err, en)
                       : cg_failf(err, en, "rank 0: out of memory");
  for (int i = 0; i < s.nc; i++) close(s.c[i].fd);
  free(s.c);
  free(s.in);
  close(lfd);
  return rc;
}

/* -- the other ranks ------------------------------------------------------ */

/* A connected socket to a, made before the deadline: fd, or -1 with the
   reason in *why. */
static int connect_to(const struct addrinfo *a, double deadline, int *why) {
  int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                  a->ai_protocol);
  if (fd < 0) {
    *why = errno;
    return -1;
  }
  if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) return fd;
  if (errno == EINPROGRESS || errno == EINTR) { /* it goes on: wait for it */
    int r = wait_fd(fd, POLLOUT, deadline), e = 0;
    socklen_t len = sizeof e;
    if (r > 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) == 0 && !e)
      return fd;
    *why = r == 0 ? ETIMEDOUT : r < 0 ? errno : e ? e : errno;
  } else {
    *why = errno;
  }
  close(fd);
  return -1;
}

/* Says hello on fd and takes rank 0's reply. */
static int exchange(int fd, const char *addr, const char *job, int rank,
                    int size, double timeout, double deadline, char *blob,
                    char *err, size_t en) {
  char buf[REPLY];
  memset(buf, 0, HELLO);
  snprintf(buf, HELLO, MAGIC "rank %d size %d\njob %s\n", rank, size, job);
  if (send_all(fd, buf, HELLO, deadline) != 0)
    return cg_failf(err, en, "rank %d cannot say hello to rank 0 at %s: %s", rank,
                addr, strerror(errno));
  /* rank 0 answers when all have come, or when it gives up at about this
     deadline: a little longer, for its word on who is missing */
  ssize_t n = recv_all(fd, buf, REPLY, deadline + 2);
  if (n < 0 && errno == ETIMEDOUT)
    return cg_failf(err, en, "rank %d waited %g s at %s for rank 0 to send the "
                "NCCL id (it sends it once all %d ranks have come)", rank,
                timeout, addr, size);
  if (n < 0 && errno != ECONNRESET)
    return cg_failf(err, en, "rank %d, waiting for rank 0 at %s: %s", rank, addr,
                strerror(errno));
  if (n < REPLY)
    return cg_failf(err, en, "rank %d: rank 0 at %s closed the connection before "
                "it sent the NCCL id (it failed, or was stopped)", rank, addr);
  size_t head = strlen(MAGIC);
  char *nl = memchr(buf + head, '\n', REPLY - head);
  if (memcmp(buf, MAGIC, head) || !nl)
    return cg_failf(err, en, "rank %d: what listens at %s is not a cugraph-lua "
                "rank 0", rank, addr);
  *nl = '\0';
  if (!strncmp(buf + head, "no ", 3))
    return cg_failf(err, en, "rank %d: %s", rank, buf + head + 3);
  if (strncmp(buf + head, "ok job ", 7))
    return cg_failf(err, en, "rank %d: what listens at %s is not a cugraph-lua "
                "rank 0", rank, addr);
  if (strcmp(buf + head + 7, job))
    return cg_failf(err, en, "rank %d: rank 0 at %s is of job '%s', this rank of "
                "job '%s': a rank of another run", rank, addr, buf + head + 7,
                job);
  n = recv_all(fd, blob, CG_RDZV_BLOB, deadline + 2);
  if (n != CG_RDZV_BLOB)
    return cg_failf(err, en, "rank %d: rank 0 at %s closed the connection before "
                "it sent the NCCL id (it failed, or was stopped)", rank, addr);
  return 0;
}

static int join(const char *host, const char *port, const char *addr,
                const char *job, int rank, int size, double timeout,
                char *blob, char *err, size_t en) {
  struct addrinfo hints, *ai;
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  double deadline = now() + timeout;
  int g, why = 0;
  /* a name the resolver does not know yet (EAI_AGAIN) is asked again */
  while ((g = getaddrinfo(host, port, &hints, &ai)) == EAI_AGAIN &&
         now() < deadline)
    nap(0.1);
  if (g)
    return cg_failf(err, en, "rank %d cannot find rank 0's host %s: %s", rank,
                host, g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
  int rc = -1;
  for (;;) {
    for (const struct addrinfo *a = ai; a; a = a->ai_next) {
      int e = 0, fd = connect_to(a, deadline, &e);
      if (fd < 0) { /* the last reason that is not the deadline's */
        if (e != ETIMEDOUT || !why) why = e;
        continue;
      }
      rc = exchange(fd, addr, job, rank, size, timeout, deadline, blob, err,
                    en);
      close(fd);
      goto done;
    }
    if (now() >= deadline) {
      cg_failf(err, en, "rank %d could not reach rank 0 at %s within %g s (%s): "
           "it has not started, or failed before it listened", rank, addr,
           timeout, strerror(why));
      break;
    }
    nap(0.05); /* rank 0 may not listen yet */
  }
done:
  freeaddrinfo(ai);
  return rc;
}

int cg_rdzv_tcp(const char *addr, const char *job, int rank, int size,
                double timeout_s, char blob[CG_RDZV_BLOB], char *err,
                size_t en) {
  char host[256], port[8];
  if (cg_rdzv_parse(addr, host, sizeof host, port, sizeof port, err, en))
    return -1;
  if (size < 2) return 0;
  return rank == 0
      ? serve_at(host, port, addr, job, size, timeout_s, blob, err, en)
      : join(host, port, addr, job, rank, size, timeout_s, blob, err, en);
}

/* cugraph-lua --nproc N [launcher options] [--] script [args]: starts N
   copies of cugraph-lua running the script, one per GPU of this machine,
   and waits for them. Each gets in its environment CUGRAPH_RANK,
   CUGRAPH_WORLD_SIZE, CUGRAPH_LOCAL_RANK, CUGRAPH_LOCAL_WORLD_SIZE,
   CUGRAPH_LUA_DEVICE (its GPU: the local rank), CUGRAPH_JOB_ID (--job-id,
   else the starter's job, else a fresh one) and one rendezvous, through
   which rank 0 hands the others the NCCL unique id (cuda.comm_world):
   CUGRAPH_RENDEZVOUS, a file, or CUGRAPH_RDZV, rank 0's TCP host:port.
   Each rank runs in a process group of its own: signals the launcher gets
   are passed on to every rank's group; when a rank fails, the others are
   stopped (SIGTERM to their groups, then SIGKILL after 5 s), and the
   launcher exits with the failed rank's status once no process of any
   group is left.

   Several machines: the same command on each, with --nnodes M,
   --node-rank K, the same --job-id, and --rendezvous PATH naming a file on
   storage all of them share or --rdzv HOST:PORT on machine 0. Started on
   each machine by srun, mpirun or a PMI starter (one task per machine),
   M and K are the starter's size and rank, the job its job, and under
   Slurm the rendezvous defaults to the first node of the step (base/world.h);
   NCCL's own transports carry the collectives. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/rdzv.h"
#include "base/world.h"
#include "host/host.h"

enum { MAX_PROCS = 1024 };

static volatile sig_atomic_t pending; /* a signal to pass on, or 0 */

static void catch(int sig) { pending = sig; }

static int number(const char *opt, const char *s, int lo, int hi) {
  char *end;
  long v = s ? strtol(s, &end, 10) : 0;
  if (!s || !*s || *end || v < lo || v > hi) {
    fprintf(stderr, "%s: %s needs an integer from %d to %d\n", HOST_NAME,
            opt, lo, hi);
    exit(EXIT_FAILURE);
  }
  return (int)v;
}

static void launch_usage(void) {
  fprintf(stderr,
          "usage: %s --nproc N [--nnodes M --node-rank K]\n"
          "          [--rendezvous PATH | --rdzv HOST:PORT] [--job-id ID]\n"
          "          [--] [lua options] script [args]\n"
          "Starts N processes running the script, one per GPU (the local\n"
          "rank), with CUGRAPH_RANK, CUGRAPH_WORLD_SIZE, CUGRAPH_LOCAL_RANK,\n"
          "CUGRAPH_LOCAL_WORLD_SIZE, CUGRAPH_LUA_DEVICE, CUGRAPH_JOB_ID and\n"
          "CUGRAPH_RENDEZVOUS (a file) or CUGRAPH_RDZV (TCP) set. On several\n"
          "machines run it on each, with the same M, its own K, and a PATH\n"
          "every machine sees (a fresh file for each run) or machine 0's\n"
          "HOST:PORT; under srun or mpirun (one task per machine) M, K and\n"
          "the job come from the starter. Without the launcher, srun and\n"
          "mpirun start the ranks themselves: cuda.comm_world() reads their\n"
          "variables (CUGRAPH_RDZV=HOST:PORT names a rendezvous).\n",
          HOST_NAME);
}

/* M, K and the job from the starter that ran the launcher, once per
   machine (srun --ntasks-per-node=1, mpirun --map-by ppr:1:node): 0, or
   -1 after saying what is wrong. */
static int from_starter(cg_world *w) {
  char err[512];
  if (cg_world_read(w, 0, err, sizeof err)) {
    fprintf(stderr, "%s: %s\n", HOST_NAME, err);
    return -1;
  }
  if (w->starter && w->local_rank > 0) {
    fprintf(stderr, "%s: %s started more than one launcher on this machine "
            "(local rank %d): start one per machine (srun --ntasks-per-node=1,"
            " mpirun --map-by ppr:1:node), or let it start the ranks without "
            "--nproc\n", HOST_NAME, w->starter, w->local_rank);
    return -1;
  }
  return 0;
}

static void setenv_int(const char *name, int v) {
  char buf[16];
  snprintf(buf, sizeof buf, "%d", v);
  setenv(name, buf, 1);
}

/* Sends sig to the process group of every rank (a rank's children too,
   after the rank itself exited). */
static void signal_all(const pid_t *group, int n, int sig) {
  for (int i = 0; i < n; i++)
    if (group[i] > 0) kill(-group[i], sig);
}

/* Whether any process of the groups is left. */
static int groups_left(pid_t *group, int n) {
  int any = 0;
  for (int i = 0; i < n; i++) {
    if (group[i] > 0 && kill(-group[i], 0) != 0 && errno == ESRCH)
      group[i] = 0;
    any |= group[i] > 0;
  }
  return any;
}

/* The exit status a rank's wait status stands for (128 + a signal). */
static int status_of(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return 1;
}

int host_launch(int argc, char **argv) {
  int nproc = 0, nnodes = 0, node = -1, i = 1;
  const char *rdv = NULL, *tcp = NULL, *job = NULL;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--nproc")) nproc = number(a, argv[++i], 1, MAX_PROCS);
    else if (!strncmp(a, "--nproc=", 8))
      nproc = number("--nproc", a + 8, 1, MAX_PROCS);
    else if (!strcmp(a, "--nnodes")) nnodes = number(a, argv[++i], 1, 1 << 16);
    else if (!strcmp(a, "--node-rank")) node = number(a, argv[++i], 0, 1 << 16);
    else if (!strcmp(a, "--rendezvous") || !strcmp(a, "--rdzv")) {
      const char *v = argv[++i];
      if (!v) {
        launch_usage();
        return EXIT_FAILURE;
      }
      if (!strcmp(a, "--rdzv")) tcp = v;
      else rdv = v;
    } else if (!strncmp(a, "--rdzv=", 7)) {
      tcp = a + 7;
    } else if (!strcmp(a, "--job-id")) {
      if (!(job = argv[++i]) || !*job || strlen(job) > 63 || strchr(job, '\n')) {
        fprintf(stderr, "%s: --job-id needs one line of 1 to 63 bytes\n",
                HOST_NAME);
        return EXIT_FAILURE;
      }
    } else if (!strcmp(a, "--")) {
      i++;
      break;
    } else {
      break;
    }
  }
  if (i >= argc || nproc < 1) {
    launch_usage();
    return EXIT_FAILURE;
  }
  if (rdv && tcp) {
    fprintf(stderr, "%s: give --rendezvous PATH or --rdzv HOST:PORT, not "
            "both\n", HOST_NAME);
    return EXIT_FAILURE;
  }
  char host[256], port[8], err[512];
  if (tcp && cg_rdzv_parse(tcp, host, sizeof host, port, sizeof port, err,
                           sizeof err)) {
    fprintf(stderr, "%s: --rdzv %s\n", HOST_NAME, err);
    return EXIT_FAILURE;
  }
  cg_world w;
  if (from_starter(&w)) return EXIT_FAILURE;
  if (nnodes == 0) nnodes = w.starter && node < 0 ? w.size : 1;
  if (node < 0) node = w.starter && nnodes == w.size ? w.rank : 0;
  if (node >= nnodes) {
    fprintf(stderr, "%s: --node-rank %d is not below --nnodes %d\n",
            HOST_NAME, node, nnodes);
    return EXIT_FAILURE;
  }
  char where[CG_WHERELEN];
  if (nnodes > 1 && !rdv && !tcp) { /* CUGRAPH_RDZV, ..., a default */
    int kind = w.starter ? cg_world_rendezvous(&w, where, sizeof where, err,
                                               sizeof err) : 0;
    if (kind < 0) {
      fprintf(stderr, "%s: %s\n", HOST_NAME, err);
      return EXIT_FAILURE;
    }
    if (kind == 't') tcp = where;
    else if (kind == 'f') rdv = where;
    else if (getenv("CUGRAPH_RDZV") && *getenv("CUGRAPH_RDZV")) tcp = getenv("CUGRAPH_RDZV");
    else if (getenv("CUGRAPH_RENDEZVOUS") && *getenv("CUGRAPH_RENDEZVOUS"))
      rdv = getenv("CUGRAPH_RENDEZVOUS");
    else {
      fprintf(stderr, "%s: --nnodes %d needs --rendezvous PATH, a file every "
              "machine sees, or --rdzv HOST:PORT, machine 0's\n", HOST_NAME,
              nnodes);
      return EXIT_FAILURE;
    }
  }
  if (!job && w.starter) job = w.job;
  if (!job) job = getenv("SLURM_JOB_ID");
  if (job && !*job) job = NULL;
  if (!job && nnodes > 1) {
    fprintf(stderr, "%s: --nnodes %d needs --job-id ID, the same on every "
            "machine (under Slurm its job id is taken)\n", HOST_NAME, nnodes);
    return EXIT_FAILURE;
  }
  char fresh[32];
  if (!job) { /* one machine: a job id of our own */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(fresh, sizeof fresh, "%lx-%lx-%lx", (long)getpid(),
             (long)ts.tv_sec, ts.tv_nsec);
    job = fresh;
  }
  setenv("CUGRAPH_JOB_ID", job, 1);
  char dir[] = "/tmp/cugraph-run-XXXXXX", file[64] = "";
  if (!rdv && !tcp) { /* one machine: a fresh file of our own */
    if (!mkdtemp(dir)) {
      fprintf(stderr, "%s: cannot make a rendezvous folder: %s\n", HOST_NAME,
              strerror(errno));
      return EXIT_FAILURE;
    }
    snprintf(file, sizeof file, "%s/nccl-id", dir);
    rdv = file;
  }
  /* exactly one rendezvous reaches the ranks */
  if (tcp) {
    setenv("CUGRAPH_RDZV", tcp, 1);
    unsetenv("CUGRAPH_RENDEZVOUS");
  } else {
    setenv("CUGRAPH_RENDEZVOUS", rdv, 1);
    unsetenv("CUGRAPH_RDZV");
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = catch;
  sigemptyset(&sa.sa_mask);
  static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1,
                                  SIGUSR2};
  for (size_t k = 0; k < sizeof forwarded / sizeof *forwarded; k++)
    sigaction(forwarded[k], &sa, NULL);

  /* this program, as the kernel (or a tool running it) names it */
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[len > 0 ? len : 0] = '\0';
  pid_t pid[MAX_PROCS], group[MAX_PROCS];
  int live = 0, code = 0, failed = -1;
  setenv_int("CUGRAPH_WORLD_SIZE", nproc * nnodes);
  setenv_int("CUGRAPH_LOCAL_WORLD_SIZE", nproc);
  for (int r = 0; r < nproc; r++) {
    setenv_int("CUGRAPH_RANK", node * nproc + r);
    setenv_int("CUGRAPH_LOCAL_RANK", r);
    setenv_int("CUGRAPH_LUA_DEVICE", r);
    fflush(NULL);
    pid[r] = fork();
    if (pid[r] == 0) {
      /* its own process group: the terminal's signals come through us */
      setpgid(0, 0);
      argv[i - 1] = argv[0];
      if (exe[0]) execv(exe, argv + i - 1);
      execvp(argv[0], argv + i - 1);
      fprintf(stderr, "%s: cannot start rank %d: %s\n", HOST_NAME, r,
              strerror(errno));
      _exit(127);
    }
    if (pid[r] < 0) {
      fprintf(stderr, "%s: cannot start rank %d: %s\n", HOST_NAME, r,
              strerror(errno));
      code = EXIT_FAILURE;
      nproc = r;
      signal_all(group, nproc, SIGTERM);
      break;
    }
    setpgid(pid[r], pid[r]); /* as the child does: whichever runs first */
    group[r] = pid[r];
    live++;
  }
  time_t stopping = code ? time(NULL) : 0;
  while (live > 0) {
    int st;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      for (int r = 0; r < nproc; r++)
        if (pid[r] == p) {
          pid[r] = 0;
          live--;
          if (status_of(st) && failed < 0) {
            failed = r;
            code = status_of(st);
            if (live > 0 && !stopping) {
              fprintf(stderr, "%s: rank %d exited with status %d; stopping "
                      "the others\n", HOST_NAME, node * nproc + r, code);
              signal_all(group, nproc, SIGTERM);
              stopping = time(NULL);
            }
          }
        }
      continue;
    }
    if (p < 0 && errno != EINTR) break;
    if (pending) {
      int sig = pending;
      pending = 0;
      signal_all(group, nproc, sig);
    }
    if (stopping && time(NULL) - stopping >= 5) signal_all(group, nproc, SIGKILL);
    struct timespec nap = {0, 10000000};
    nanosleep(&nap, NULL);
  }
  /* a stopped rank's children go with it */
  if (stopping) {
    while (groups_left(group, nproc) && time(NULL) - stopping < 5) {
      struct timespec nap = {0, 10000000};
      nanosleep(&nap, NULL);
    }
    signal_all(group, nproc, SIGKILL);
  }
  if (file[0]) {
    unlink(file);
    rmdir(dir);
  } else if (node == 0 && rdv) {
    unlink(rdv);
  }
  return code;
}

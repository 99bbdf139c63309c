/* Free TCP ports for the rendezvous specs (spec/05-jobs_spec.lua):
     port [-6]          prints a port free on 127.0.0.1 (or ::1) now
     port hold SECONDS  listens on a free port of 127.0.0.1 and prints
                        "<port> <pid>", then holds it SECONDS (or until
                        killed): a port another program has taken
   Exits 1 when the loopback address cannot be bound (no IPv6 here). */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
  int v6 = argc > 1 && !strcmp(argv[1], "-6");
  int hold = argc > 2 && !strcmp(argv[1], "hold") ? atoi(argv[2]) : 0;
  struct sockaddr_storage ss;
  socklen_t len;
  memset(&ss, 0, sizeof ss);
  if (v6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_loopback;
    len = sizeof *a;
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof *a;
  }
  int fd = socket(ss.ss_family, SOCK_STREAM, 0);
  if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) != 0 ||
      (hold && listen(fd, 4) != 0) ||
      getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
    perror("port");
    return 1;
  }
  int port = ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                      : ((struct sockaddr_in *)&ss)->sin_port);
  if (!hold) {
    close(fd);
    printf("%d\n", port);
    return 0;
  }
  printf("%d %ld\n", port, (long)getpid());
  fflush(stdout);
  sleep((unsigned)hold);
  close(fd);
  return 0;
}

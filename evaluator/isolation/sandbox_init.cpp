// kloop-sandbox-init: PID 1 of a strict sandbox. A small image of its own
// (no LibTorch to load, no copy of the driver's memory) that starts the
// command it is given as its child, so that the worker gets ordinary signal
// semantics (PID 1 ignores its own SIGABRT), reaps whatever the candidate
// orphans, and ends with the worker: the kernel then kills everything left
// in the namespace. The worker's end is mirrored in the exit code: its
// code, or 128 + the signal that killed it (WorkerProcess decodes it).
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

int main(int argc, char** argv) {
  if (argc < 2) return 125;
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  pid_t worker = fork();
  if (worker < 0) return 125;
  if (worker == 0) {
    execv(argv[1], argv + 1);
    _exit(127);
  }
  // The channel and the log belong to the worker: the driver must see them
  // close when it ends.
  for (int fd = 0; fd <= 3; ++fd) close(fd);
  for (;;) {
    int status = 0;
    pid_t done = wait(&status);
    if (done < 0 && errno == EINTR) continue;
    if (done < 0) return 125;
    if (done != worker) continue;  // an orphan of the candidate's
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  }
}

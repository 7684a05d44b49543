#include "dist/mpi_launch.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace pagellm {
namespace {

pid_t g_mpirun = 0;

void ForwardSignal(int sig) {
  if (g_mpirun > 0) kill(g_mpirun, sig);
}

}  // namespace

bool StartedByMpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
         std::getenv("PMI_RANK") != nullptr;
}

int RunUnderMpirun(int num_ranks, int threads_per_rank, char** argv) {
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) {
    std::fprintf(stderr, "error: cannot find this executable (/proc/self/exe): %s\n",
                 std::strerror(errno));
    return 1;
  }
  self[len] = '\0';
  std::vector<std::string> args = {"mpirun", "-np", std::to_string(num_ranks), "--oversubscribe"};
  const unsigned cores = std::thread::hardware_concurrency();
  if (threads_per_rank > 0 &&
      static_cast<unsigned>(num_ranks) * static_cast<unsigned>(threads_per_rank) <= cores) {
    args.insert(args.end(),
                {"--map-by", "slot:PE=" + std::to_string(threads_per_rank), "--bind-to", "core"});
  } else {
    args.insert(args.end(), {"--bind-to", "none"});
  }
  args.push_back(self);
  for (int i = 1; argv[i] != nullptr; ++i) args.push_back(argv[i]);
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) {
    std::fprintf(stderr, "error: fork: %s\n", std::strerror(errno));
    return 1;
  }
  if (pid == 0) {
    if (geteuid() == 0) {
      setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
      setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    }
    execvp("mpirun", cargs.data());
    std::fprintf(stderr,
                 "error: --tensor-parallel-size %d needs OpenMPI's mpirun to start the ranks, and "
                 "it cannot be run: %s (Debian: apt install openmpi-bin)\n",
                 num_ranks, std::strerror(errno));
    _exit(127);
  }
  g_mpirun = pid;
  struct sigaction sa = {};
  sa.sa_handler = ForwardSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      std::fprintf(stderr, "error: waitpid: %s\n", std::strerror(errno));
      return 1;
    }
  }
  g_mpirun = 0;
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    if (code != 0 && code != 127)
      std::fprintf(stderr, "error: the %d tensor-parallel ranks ended with exit status %d\n",
                   num_ranks, code);
    return code;
  }
  std::fprintf(stderr, "error: mpirun ended by signal %d\n", WTERMSIG(status));
  return 1;
}

}  // namespace pagellm

// kiln-peak-rss FILE PROGRAM [ARGS...]: runs PROGRAM in a child forked from
// this small process, writes the child's peak resident set (ru_maxrss, as
// wait4 reports it) to FILE, and exits with the child's status (128 + the
// signal that ended it).
//
// The suite measures its tools through it (tests/support/run_tool.cpp): a
// child that posix_spawn starts straight from the test process shares that
// process's memory until exec, and Linux carries the larger process's peak
// into the child's ru_maxrss at exec, so the figure would be the test
// process's own peak whenever that is the larger.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: kiln-peak-rss FILE PROGRAM [ARGS...]\n");
        return 2;
    }
    const pid_t pid = fork();
    if (pid < 0) {
        std::perror("kiln-peak-rss: fork");
        return 2;
    }
    if (pid == 0) {
        execv(argv[2], argv + 2);
        std::perror("kiln-peak-rss: exec");
        _exit(127);
    }
    int status = 0;
    rusage usage{};
    if (wait4(pid, &status, 0, &usage) != pid) {
        std::perror("kiln-peak-rss: wait4");
        return 2;
    }
    std::FILE* out = std::fopen(argv[1], "w");
    if (out == nullptr || std::fprintf(out, "%ld\n", static_cast<long>(usage.ru_maxrss)) < 0 || std::fclose(out) != 0) {
        std::perror("kiln-peak-rss: writing the figure");
        return 2;
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* A program that closes every descriptor it has, as daemons and some shells do, then reuses
 * the numbers (tests/test_libiez_programs.py).
 *
 *   iez-test-closeall DIR
 *
 * Writes 100 bytes to DIR/a, closes descriptors 3..1023 one by one without closing DIR/a's
 * first, opens DIR/b (which gets DIR/a's number again) and writes 200 bytes; opens DIR/c,
 * writes 300 bytes, and leaves with closefrom(3) and close_range; then writes 400 bytes to
 * DIR/d, which must again be counted. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int make(const char *dir, const char *name, int n)
{
    char path[4096], buf[512];
    memset(buf, 'y', sizeof buf);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, buf, (size_t)n) != n) {
        perror(path);
        return -1;
    }
    return fd;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    int a = make(argv[1], "a", 100);
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    int b = make(argv[1], "b", 200);
    int c = make(argv[1], "c", 300);
    if (a < 0 || b != a || c < 0)
        return 1;
    closefrom(3);
    close_range(3, ~0u, 0);
    int d = make(argv[1], "d", 400);
    if (d != a)
        return 1;
    return close(d);
}

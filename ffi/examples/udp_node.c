/* udp_node.c: a tenure node in C that joins a cluster of `tenure node`
 * processes. One UDP socket, a plain poll loop, and crash-safe state and
 * membership files in the formats `tenure node` keeps (`tenure state`
 * reads the first): membership changes made with `tenure ctl` reach it.
 *
 *   udp_node ID CLUSTER LISTEN DATA_DIR HEARTBEAT_MS DEATH_TIMEOUT_MS \
 *            PEER_ID=IP:PORT...
 *
 * With TENURE_KEY_FILE set, frames are authenticated with that cluster
 * key (the file `tenure keygen` writes; every member must hold it).
 * Events are printed as JSON lines on stdout, as `tenure node` prints
 * them (became_leader and leader_changed in the same shape).
 *
 * Build (see docs/src/c.md):
 *   cargo build --release -p tenure-ffi
 *   cc -O2 -Iffi/include ffi/examples/udp_node.c \
 *      target/release/libtenure_ffi.a -lpthread -ldl -lm -o udp_node
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tenure.h"

#define MAX_PEERS 16

struct peer {
    uint64_t id;
    struct sockaddr_in addr;
};

static struct peer peers[MAX_PEERS];
static size_t npeers;
static uint64_t my_id, cluster;
static const char *data_dir;
static int sock;

/* The engine's clock: monotonic, and counting suspend where the system
 * can (a lease must not outlive a suspended machine's sleep). */
static uint64_t now_ns(void) {
#ifdef CLOCK_BOOTTIME
    clockid_t clock = CLOCK_BOOTTIME;
#else
    clockid_t clock = CLOCK_MONOTONIC;
#endif
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A permanent problem (configuration, damaged state): exit 2. */
static void fail(const char *what, TenureError *err) {
    fprintf(stderr, "error: node %llu: %s: %s\n", (unsigned long long)my_id, what,
            tenure_error_message(err));
    tenure_error_free(err);
    exit(2);
}

static void check(TenureCode code, const char *what, TenureError *err) {
    if (code != TENURE_CODE_OK) fail(what, err);
}

static int parse_addr(const char *text, struct sockaddr_in *out) {
    const char *colon = strrchr(text, ':');
    char host[64];
    if (colon == NULL || (size_t)(colon - text) >= sizeof host) return -1;
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    memset(out, 0, sizeof *out);
    out->sin_family = AF_INET;
    out->sin_port = htons((uint16_t)atoi(colon + 1));
    return inet_pton(AF_INET, host, &out->sin_addr) == 1 ? 0 : -1;
}

static void path_in_dir(char *out, size_t cap, const char *name) {
    if (snprintf(out, cap, "%s/%s", data_dir, name) >= (int)cap) {
        fprintf(stderr, "error: data directory path too long\n");
        exit(2);
    }
}

/* Durable before acknowledged: write a temporary file, fsync it, rename
 * it over `name`, fsync the directory. A crash at any point leaves the
 * old record or the new one. */
static void save_file(const char *name, const uint8_t *record, size_t len) {
    char tmp[512], path[512], tmp_name[128];
    snprintf(tmp_name, sizeof tmp_name, "%s.tmp", name);
    path_in_dir(tmp, sizeof tmp, tmp_name);
    path_in_dir(path, sizeof path, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, record, len) != (ssize_t)len || fsync(fd) != 0 || close(fd) != 0 ||
        rename(tmp, path) != 0) {
        perror(tmp);
        exit(1);
    }
    int dir = open(data_dir, O_RDONLY);
    if (dir < 0 || fsync(dir) != 0) {
        perror(data_dir);
        exit(1);
    }
    close(dir);
}

static void save_state(TenureHardState state) {
    uint8_t record[TENURE_STATE_RECORD_MAX];
    size_t len = 0;
    TenureError *err = NULL;
    check(tenure_state_encode(my_id, cluster, state, record, sizeof record, &len, &err),
          "encode state", err);
    save_file("tenure.state", record, len);
}

/* Reads a whole file of at most `cap` bytes: its length, or -1 if it does
 * not exist. */
static ssize_t read_file(const char *path, uint8_t *bytes, size_t cap) {
    int fd = open(path, O_RDONLY);
    if (fd < 0 && errno == ENOENT) return -1;
    ssize_t n = fd < 0 ? -1 : read(fd, bytes, cap);
    if (n < 0 || (size_t)n == cap) {
        fprintf(stderr, "error: cannot read %s (or it is too large)\n", path);
        exit(2);
    }
    close(fd);
    return n;
}

/* The state storage confirmed last; zero for a node that never ran. A
 * damaged file stops the node: starting from zero could vote twice. */
static TenureHardState load_state(void) {
    TenureHardState state = {0, 0};
    char path[512];
    path_in_dir(path, sizeof path, "tenure.state");
    uint8_t bytes[256];
    ssize_t n = read_file(path, bytes, sizeof bytes);
    if (n < 0) return state;
    uint64_t owner = 0, owner_cluster = 0;
    TenureError *err = NULL;
    check(tenure_state_decode(bytes, (size_t)n, &state, &owner, &owner_cluster, &err), path, err);
    if (owner != 0 && (owner != my_id || owner_cluster != cluster)) {
        fprintf(stderr, "error: %s belongs to node %llu of cluster %llu\n", path,
                (unsigned long long)owner, (unsigned long long)owner_cluster);
        exit(2);
    }
    return state;
}

static void print_event(const TenureEvent *e) {
    switch (e->kind) {
    case TENURE_EVENT_KIND_BECAME_LEADER:
        printf("{\"event\":{\"became_leader\":{\"term\":%llu,\"token\":{\"term\":%llu,\"leader\":%llu}}}}\n",
               (unsigned long long)e->term, (unsigned long long)e->token.term,
               (unsigned long long)e->token.leader);
        break;
    case TENURE_EVENT_KIND_LEADER_CHANGED:
        if (e->node == 0)
            printf("{\"event\":{\"leader_changed\":{\"term\":%llu,\"leader\":null}}}\n",
                   (unsigned long long)e->term);
        else
            printf("{\"event\":{\"leader_changed\":{\"term\":%llu,\"leader\":%llu}}}\n",
                   (unsigned long long)e->term, (unsigned long long)e->node);
        break;
    default:
        /* Rust's debug text has no quotes or backslashes to escape. */
        printf("{\"event_text\":\"%s\"}\n", e->description);
    }
    fflush(stdout);
}

static void feed(TenureNode *node, const TenureInput *input);

/* Executes the node's actions in order. A persist is made durable before
 * it is acknowledged; the actions the acknowledgement releases join the
 * queue behind the rest. */
static void drain(TenureNode *node) {
    TenureAction a;
    while (tenure_actions_next(node, &a)) {
        switch (a.kind) {
        case TENURE_ACTION_KIND_PERSIST: {
            save_state(a.state);
            TenureInput done = {.kind = TENURE_INPUT_KIND_PERSISTED, .state = a.state};
            feed(node, &done);
            break;
        }
        case TENURE_ACTION_KIND_PERSIST_MEMBERSHIP: {
            save_file("tenure.membership", a.bytes, a.len);
            TenureInput done = {.kind = TENURE_INPUT_KIND_PERSISTED_MEMBERSHIP,
                                .membership = a.membership};
            feed(node, &done);
            break;
        }
        case TENURE_ACTION_KIND_SEND: {
            /* The address the node names: members a change added too. */
            struct sockaddr_in to;
            if (a.addr != NULL && parse_addr(a.addr, &to) == 0) {
                /* Best effort: the protocol tolerates loss. */
                (void)sendto(sock, a.bytes, a.len, 0, (const struct sockaddr *)&to, sizeof to);
            }
            break;
        }
        case TENURE_ACTION_KIND_EVENT:
            print_event(&a.event);
            break;
        default:
            break;
        }
    }
}

static void feed(TenureNode *node, const TenureInput *input) {
    TenureError *err = NULL;
    TenureCode code = tenure_node_step(node, now_ns(), input, &err);
    if (code == TENURE_CODE_DROPPED) {
        /* Not for us, or not authentic: counted, and otherwise ignored. */
        tenure_error_free(err);
    } else if (code != TENURE_CODE_OK) {
        fail("step", err);
    }
}

int main(int argc, char **argv) {
    if (argc < 8) {
        fprintf(stderr, "usage: %s ID CLUSTER LISTEN DATA_DIR HEARTBEAT_MS DEATH_TIMEOUT_MS PEER_ID=IP:PORT...\n",
                argv[0]);
        return 2;
    }
    my_id = strtoull(argv[1], NULL, 10);
    cluster = strtoull(argv[2], NULL, 10);
    data_dir = argv[4];
    uint64_t voters[MAX_PEERS + 1] = {my_id};
    for (int i = 7; i < argc && npeers < MAX_PEERS; i++) {
        char *eq = strchr(argv[i], '=');
        peers[npeers].id = strtoull(argv[i], NULL, 10);
        if (eq == NULL || parse_addr(eq + 1, &peers[npeers].addr) != 0) {
            fprintf(stderr, "error: peer %s is not ID=IP:PORT\n", argv[i]);
            return 2;
        }
        voters[npeers + 1] = peers[npeers].id;
        npeers++;
    }
    if (mkdir(data_dir, 0700) != 0 && errno != EEXIST) {
        perror(data_dir);
        return 2;
    }
    struct sockaddr_in listen;
    sock = socket(AF_INET, SOCK_DGRAM, 0);
    if (parse_addr(argv[3], &listen) != 0 || sock < 0 ||
        bind(sock, (struct sockaddr *)&listen, sizeof listen) != 0) {
        perror(argv[3]);
        return 1;
    }

    TenureError *err = NULL;
    TenureConfig *config = tenure_config_new(my_id, voters, npeers + 1);
    check(tenure_config_set_cluster_id(config, cluster, &err), "cluster", err);
    check(tenure_config_set_heartbeat_ms(config, strtoull(argv[5], NULL, 10), &err), "heartbeat", err);
    check(tenure_config_set_death_timeout_ms(config, strtoull(argv[6], NULL, 10), &err), "death timeout", err);
    for (int i = 7; i < argc; i++) {
        check(tenure_config_add_peer(config, peers[i - 7].id, strchr(argv[i], '=') + 1, &err), argv[i], err);
    }
    /* Restarted after a membership change: the membership stored last. */
    char membership_path[512];
    uint8_t membership[4096];
    path_in_dir(membership_path, sizeof membership_path, "tenure.membership");
    ssize_t membership_len = read_file(membership_path, membership, sizeof membership);
    if (membership_len >= 0)
        check(tenure_config_set_membership(config, membership, (size_t)membership_len, &err),
              membership_path, err);
    const char *key = getenv("TENURE_KEY_FILE");
    if (key != NULL) check(tenure_config_set_key_file(config, key, NULL, data_dir, &err), key, err);
    TenureNode *node = tenure_node_new(config, load_state(), now_ns(), &err);
    tenure_config_free(config);
    if (node == NULL) fail("start", err);

    for (;;) {
        drain(node);
        uint64_t deadline = tenure_node_next_deadline_ns(node), now = now_ns();
        int timeout = deadline == TENURE_NO_DEADLINE ? 1000
                      : deadline <= now              ? 0
                                                     : (int)((deadline - now + 999999) / 1000000);
        struct pollfd p = {.fd = sock, .events = POLLIN};
        if (poll(&p, 1, timeout) < 0 && errno != EINTR) {
            perror("poll");
            return 1;
        }
        if (p.revents & POLLIN) {
            uint8_t buf[9000];
            struct sockaddr_in src;
            socklen_t len = sizeof src;
            ssize_t n = recvfrom(sock, buf, sizeof buf, 0, (struct sockaddr *)&src, &len);
            if (n >= 0 && src.sin_family == AF_INET) {
                char ip[INET_ADDRSTRLEN], from[INET_ADDRSTRLEN + 8];
                inet_ntop(AF_INET, &src.sin_addr, ip, sizeof ip);
                snprintf(from, sizeof from, "%s:%u", ip, (unsigned)ntohs(src.sin_port));
                TenureInput in = {.kind = TENURE_INPUT_KIND_RECEIVE, .bytes = buf, .len = (size_t)n, .from_addr = from};
                feed(node, &in);
            }
        }
        if (tenure_node_next_deadline_ns(node) <= now_ns()) {
            TenureInput tick = {.kind = TENURE_INPUT_KIND_TICK};
            feed(node, &tick);
        }
    }
}

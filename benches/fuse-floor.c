/*
 * The floor under any FUSE file system's `ls -l`: a libfuse server that keeps nothing
 * but the names of N empty files in its root and answers every request from memory at
 * once. `benches/acl-ls.sh` lists it beside a Strata mount, so what a FUSE request costs
 * on this machine (kernel, context switches) is measured in the same run, apart from
 * what Strata adds.
 *
 *   fuse-floor MOUNTPOINT FILES acl|noacl
 *
 * `acl`: the kernel is told the file system keeps POSIX ACLs (FUSE_POSIX_ACL, with
 * default_permissions, as a Strata mount of a volume formatted --enable-acl) and every
 * file answers "no list" (ENODATA), so `ls -l` asks each file once. `noacl`: the first
 * "not supported" stops ls asking, as on a volume without lists. Every other extended
 * attribute is "not supported" in both (as Strata without --enable-selinux). Entries and
 * attributes are kept by the kernel for 1 s, Strata's default.
 */
#define FUSE_USE_VERSION 31

#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static unsigned long file_count;
static int keeps_acls;

static int is_acl_name(const char *name) {
    return strcmp(name, "system.posix_acl_access") == 0 ||
           strcmp(name, "system.posix_acl_default") == 0;
}

/* Inode 1 is the root; file i (0-based) is inode i + 2, named file-%06lu. */
static int fill_attr(fuse_ino_t ino, struct stat *st) {
    memset(st, 0, sizeof(*st));
    st->st_ino = ino;
    st->st_uid = getuid();
    st->st_gid = getgid();
    if (ino == 1) {
        st->st_mode = S_IFDIR | 0755;
        st->st_nlink = 2;
        return 0;
    }
    if (ino < 2 || ino - 2 >= file_count)
        return ENOENT;
    st->st_mode = S_IFREG | 0644;
    st->st_nlink = 1;
    return 0;
}

static void fill_entry(fuse_ino_t ino, struct fuse_entry_param *e) {
    memset(e, 0, sizeof(*e));
    e->ino = ino;
    e->attr_timeout = 1.0;
    e->entry_timeout = 1.0;
    fill_attr(ino, &e->attr);
}

static void floor_init(void *userdata, struct fuse_conn_info *conn) {
    (void)userdata;
    if (keeps_acls && (conn->capable & FUSE_CAP_POSIX_ACL))
        conn->want |= FUSE_CAP_POSIX_ACL;
    if (conn->capable & FUSE_CAP_READDIRPLUS)
        conn->want |= FUSE_CAP_READDIRPLUS;
}

static void floor_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
    unsigned long i;
    char tail;
    if (parent != 1 || sscanf(name, "file-%lu%c", &i, &tail) != 1 || i >= file_count) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    struct fuse_entry_param e;
    fill_entry(i + 2, &e);
    fuse_reply_entry(req, &e);
}

static void floor_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    (void)fi;
    struct stat st;
    int err = fill_attr(ino, &st);
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_attr(req, &st, 1.0);
}

static void floor_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                              struct fuse_file_info *fi) {
    (void)fi;
    if (ino != 1) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    char *buf = malloc(size);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    size_t used = 0;
    for (unsigned long i = (unsigned long)off; i < file_count; i++) {
        char name[32];
        snprintf(name, sizeof(name), "file-%06lu", i);
        struct fuse_entry_param e;
        fill_entry(i + 2, &e);
        size_t need = fuse_add_direntry_plus(req, buf + used, size - used, name, &e,
                                             (off_t)(i + 1));
        if (need > size - used)
            break;
        used += need;
    }
    fuse_reply_buf(req, buf, used);
    free(buf);
}

static void floor_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size) {
    (void)ino;
    (void)size;
    fuse_reply_err(req, keeps_acls && is_acl_name(name) ? ENODATA : EOPNOTSUPP);
}

static void floor_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
    (void)ino;
    if (size == 0)
        fuse_reply_xattr(req, 0);
    else
        fuse_reply_buf(req, NULL, 0);
}

static const struct fuse_lowlevel_ops floor_ops = {
    .init = floor_init,
    .lookup = floor_lookup,
    .getattr = floor_getattr,
    .readdirplus = floor_readdirplus,
    .getxattr = floor_getxattr,
    .listxattr = floor_listxattr,
};

int main(int argc, char **argv) {
    if (argc != 4 || (strcmp(argv[3], "acl") != 0 && strcmp(argv[3], "noacl") != 0)) {
        fprintf(stderr, "usage: %s MOUNTPOINT FILES acl|noacl\n", argv[0]);
        return 2;
    }
    char *end;
    file_count = strtoul(argv[2], &end, 10);
    if (*end != '\0') {
        fprintf(stderr, "fuse-floor: FILES must be a number, not %s\n", argv[2]);
        return 2;
    }
    keeps_acls = strcmp(argv[3], "acl") == 0;
    char *fuse_argv[] = {argv[0], "-o", "default_permissions,fsname=fuse-floor", NULL};
    struct fuse_args args = FUSE_ARGS_INIT(3, fuse_argv);
    struct fuse_session *se = fuse_session_new(&args, &floor_ops, sizeof(floor_ops), NULL);
    if (!se)
        return 1;
    int rc = 1;
    if (fuse_session_mount(se, argv[1]) == 0) {
        /* Ready: the mount is up (the script waits for this line). */
        printf("mounted\n");
        fflush(stdout);
        rc = fuse_session_loop_mt(se, 1);
        fuse_session_unmount(se);
    }
    fuse_session_destroy(se);
    return rc ? 1 : 0;
}

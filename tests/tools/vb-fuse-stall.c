/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vb-fuse-stall MOUNTPOINT SIZE: a FUSE file system holding one file,
 * "disk", of SIZE bytes of zeros, with every cache off, so that each
 * lookup reaches this process. Stopped with SIGSTOP it stands for a file
 * system that no longer answers (a dead NFS server, a hung FUSE daemon):
 * whatever looks at a path under it waits until SIGCONT. Tests use it to
 * show that vblkd's op worker is never held by such a path. */
#define FUSE_USE_VERSION 35
#include <errno.h>
#include <fuse.h>
#include <glib.h>
#include <string.h>
#include <sys/stat.h>

static off_t disk_size;

static void *
stall_init (struct fuse_conn_info *conn, struct fuse_config *cfg)
{
  cfg->entry_timeout = 0;
  cfg->attr_timeout = 0;
  cfg->negative_timeout = 0;
  return NULL;
}

static int
stall_getattr (const char *path, struct stat *st, struct fuse_file_info *fi)
{
  memset (st, 0, sizeof *st);
  if (strcmp (path, "/") == 0)
    {
      st->st_mode = S_IFDIR | 0755;
      st->st_nlink = 2;
      return 0;
    }
  if (strcmp (path, "/disk") != 0)
    return -ENOENT;
  st->st_mode = S_IFREG | 0644;
  st->st_nlink = 1;
  st->st_size = disk_size;
  return 0;
}

static int
stall_open (const char *path, struct fuse_file_info *fi)
{
  return strcmp (path, "/disk") == 0 ? 0 : -ENOENT;
}

static int
stall_read (const char *path, char *buf, size_t size, off_t offset, struct fuse_file_info *fi)
{
  if (offset >= disk_size)
    return 0;
  if ((off_t) size > disk_size - offset)
    size = disk_size - offset;
  memset (buf, 0, size);
  return (int) size;
}

static const struct fuse_operations ops = {
  .init = stall_init,
  .getattr = stall_getattr,
  .open = stall_open,
  .read = stall_read,
};

int
main (int argc, char **argv)
{
  char *args[] = { argv[0], "-f", "-s", "-o", "fsname=vb-fuse-stall", argv[1], NULL };

  if (argc != 3)
    {
      g_printerr ("usage: vb-fuse-stall MOUNTPOINT SIZE\n");
      return 2;
    }
  disk_size = (off_t) g_ascii_strtoull (argv[2], NULL, 10);
  return fuse_main (G_N_ELEMENTS (args) - 1, args, &ops, NULL);
}

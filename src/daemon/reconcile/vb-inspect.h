/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a component's path is, read from the outside world in this one
 * place: its type and size, who else holds it, whether vblk made it, and
 * its superblock. The type is known before anything that could block is
 * opened (vb-open.h), and the look runs on a thread of its own that the
 * caller waits for at most a bounded time: a path on a hung file system,
 * or a device whose open never returns, cannot hold the op worker. */
#pragma once

#include <glib.h>
#include <sys/types.h>

#include "backend.h"
#include "superblock.h"

G_BEGIN_DECLS

#define VB_INSPECT_TIMEOUT_MS 10000

typedef enum {
  VB_INSPECT_TYPE = 0,            /* type, size, identity: always */
  VB_INSPECT_CLAIMS = 1 << 0,     /* mounts, holders, O_EXCL, vblk's nodes */
  VB_INSPECT_SUPERBLOCK = 1 << 1, /* the superblock of the first handler that knows it */
  /* with CLAIMS, on a node vblk made too: its O_EXCL probe (a node about
   * to be stopped; other nodes vblk made are never opened) */
  VB_INSPECT_EXCLUSIVE = 1 << 2,
} VbInspectFlags;

typedef struct {
  char *path;
  VbInspectFlags flags; /* what was looked at */
  gboolean is_block;
  guint64 size;
  dev_t dev; /* a file: its file system's device (st_dev); a block device: st_rdev */
  ino_t ino; /* a file's inode */
  /* VB_INSPECT_CLAIMS */
  char *mounted_on;     /* it, or a partition of it, is mounted there */
  char *holders;        /* the kernel's holders (dm-0, md127), of it or a partition */
  gboolean exclusive;   /* someone holds it open O_EXCL (a file system, md, dm, an engine) */
  gboolean owned;       /* a block node some vblkd made: */
  VbNodeOwner owner;    /*   whose */
  GPtrArray *below;     /* VbNodeOwner*: vblk nodes it is built on (slaves, or the
                           device under a file's file system) */
  gboolean engine_file; /* a file of a vblk engine's FUSE mount */
  /* VB_INSPECT_SUPERBLOCK */
  gboolean has_superblock;
  VbSuperblock superblock;
  char *superblock_error; /* a superblock that is there but unreadable or damaged */
} VbPathFacts;

void vb_path_facts_free (VbPathFacts *facts);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbPathFacts, vb_path_facts_free)

/* Looks at @path: NULL with @error when it is not there (NOT_FOUND), not a
 * regular file or block device (INVALID_ARGUMENT, naming its type), a
 * block device without medium (NOT_FOUND), or the look did not finish
 * within @timeout_ms (FAILED; 0: wait as long as it takes). */
VbPathFacts *vb_inspect (const char *path, VbInspectFlags flags, guint timeout_ms, GError **error);

/* Whether block device @devnum is a node some vblkd made, or is built on
 * one (a partition, dm or md over it): then it is never a blank disk to
 * the policy. *@why (may be NULL) says which, for people. */
gboolean vb_inspect_is_vblk_node (dev_t devnum, char **why);

/* One name for a file or disk, whatever path leads to it: a file by its
 * file system and inode, a block device by its number. */
typedef struct {
  char kind; /* 'f' a file, 'b' a block device, 0 none (not there, neither, no answer) */
  dev_t dev; /* a file's st_dev; a block device's st_rdev */
  ino_t ino; /* a file's inode (0 for a block device) */
} VbIdentity;

VbIdentity vb_path_facts_identity (const VbPathFacts *facts);
/* Both the same file or disk (never so when either has none). */
gboolean vb_identity_equal (const VbIdentity *a, const VbIdentity *b);

/* The identities of @n_paths paths (@out: as many), looked at one after
 * the other on one of the looks' threads, the caller waiting while they
 * get on: a path that makes no progress for @timeout_ms is marked
 * stalled (as vb_inspect does) and has none, and the paths after it are
 * looked at on another thread; a path stalled already is not looked at.
 * One hand-off for all: a thread each was most of a change's cost at
 * 10,000 devices. A path is looked at again only when it may lead
 * elsewhere since last time: its directories (each looked at first,
 * once) changed, it is a link, or the mounts changed (vb-identity-memo.h). */
void vb_inspect_identities (const char *const *paths, guint n_paths, guint timeout_ms,
                            VbIdentity *out);
/* How many paths vb_inspect_identities looked at so far: those its
 * memo did not know (vb-identity-memo.h) */
guint vb_inspect_identities_looked_at (void);

G_END_DECLS

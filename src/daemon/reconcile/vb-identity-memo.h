/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What each path led to when last looked at (vb_inspect_identities), and
 * when that still holds without looking again: a name in a directory
 * leads to the same file until the directory changes, and a directory
 * that changes gets a new change time. Pure logic: vb-inspect.c takes
 * the directories' stamps and the paths' identities. */
#pragma once

#include <glib.h>
#include <sys/types.h>

#include "vb-inspect.h"

G_BEGIN_DECLS

/* A directory on the path, as lstat() and statfs() saw it */
typedef struct {
  gboolean ok;    /* looked at, and a directory (not a link to one) */
  gboolean local; /* on a file system whose change times are its own (ext4, xfs, btrfs, tmpfs) */
  dev_t dev;
  ino_t ino;
  gint64 ctime_ns;
  gint64 mtime_ns;
  gint64 taken_ns; /* the wall clock just before the look */
} VbDirStamp;

/* A directory whose change time is at least this much older than the
 * look is stable: a change after the look cannot leave its times as
 * they were (timestamps come from a coarse clock; FAT-like file systems,
 * whose times are coarser, are not trusted at all). */
#define VB_DIR_STABLE_NS (G_GINT64_CONSTANT (2) * G_TIME_SPAN_SECOND * 1000)

typedef struct _VbIdentityMemo VbIdentityMemo;

/* @changed, asked at each recall, says whether the mounts changed since
 * it was last asked: then everything is forgotten first (a mount can put
 * another file behind a path without changing any directory). */
VbIdentityMemo *vb_identity_memo_new_full (gboolean (*changed) (gpointer data), gpointer data);
void vb_identity_memo_free (VbIdentityMemo *memo);

/* One call: @paths (kept by the caller until vb_identity_memo_end),
 * each found in the memo once. */
typedef struct _VbIdentityMemoCall VbIdentityMemoCall;

VbIdentityMemoCall *vb_identity_memo_begin (VbIdentityMemo *memo, const char *const *paths,
                                            guint n);
/* The directories to stamp before the paths are recalled: every
 * ancestor of each path it may remember (absolute, no "." or ".."),
 * each once, parents first. */
GPtrArray *vb_identity_memo_dirs (VbIdentityMemoCall *call);
/* With the @stamps of the directories (taken before this call, none
 * for one not looked at): @out[i] for the paths still known. */
void vb_identity_memo_recall (VbIdentityMemoCall *call, const VbDirStamp *stamps, VbIdentity *out);
/* Which paths vb_identity_memo_recall knew. */
const gboolean *vb_identity_memo_known (VbIdentityMemoCall *call);
/* The identities of the paths not known, looked at after the stamps
 * (@links[i]: path i itself is a symbolic link, whose target may change
 * anywhere: never remembered; nor a path whose directories are not
 * trusted, or changed since the stamps). */
void vb_identity_memo_record (VbIdentityMemoCall *call, const VbIdentity *ids,
                              const gboolean *links);
void vb_identity_memo_end (VbIdentityMemoCall *call);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbIdentityMemoCall, vb_identity_memo_end)

/* How many paths it remembers. */
guint vb_identity_memo_size (VbIdentityMemo *memo);

G_END_DECLS

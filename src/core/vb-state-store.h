/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The desired state on disk: state.json, the whole state written
 * atomically, and state.journal beside it, one line for each change since
 * state.json was written, so that a change costs the bytes of what it
 * changed, not of the whole state. The journal's first line names the
 * state.json it follows (its SHA-256); each record carries its own SHA-256.
 * It is folded into state.json once it is as large as state.json (and
 * 32 KiB), so N changes write O(N) bytes in all. Format in vb-state-store.c.
 *
 * What is acknowledged is on disk (fdatasync of the record, or the atomic
 * rename of state.json); a record cut by a crash is the last line, was not
 * acknowledged, and is left out when loading; anything else that is wrong
 * refuses the load, naming the file and the line. */
#pragma once

#include "vb-state.h"

G_BEGIN_DECLS

#define VB_STATE_JOURNAL_FILE "state.journal"

typedef struct _VbStateStore VbStateStore;

/* @state_path: state.json; the journal is state.journal in its directory. */
VbStateStore *vb_state_store_new (const char *state_path);
void vb_state_store_free (VbStateStore *store);
const char *vb_state_store_journal_path (VbStateStore *store);

/* The desired state as the last acknowledged change left it: state.json
 * with the journal replayed (a new copy; the store keeps its own). For the
 * owner of the state dir (it holds the lock): a journal it cannot append
 * to (cut, or left from before state.json was last written) makes the next
 * commit write state.json whole. */
VbState *vb_state_store_load (VbStateStore *store, GError **error);

/* Makes @next durable: a journal record of the devices that differ from
 * what is durable now, or state.json whole. Nothing that would not load
 * again is written. On an error the change is not acknowledged; it is
 * taken back where it can be (a failed append is truncated), but a write
 * the disk reported as failed may still have reached it, and after any
 * error the next commit writes state.json whole. Call after a load. The
 * store keeps @next's device configs (vb_state_share): the caller changes
 * them afterwards only through vb_state_lookup_mut or vb_state_device_mut,
 * as it does the state a load returns. */
gboolean vb_state_store_commit (VbStateStore *store, const VbState *next, GError **error);

/* Bytes this store has written since it was made (state.json and
 * journal; for the tests of how the cost grows). */
guint64 vb_state_store_bytes_written (VbStateStore *store);

/* The same reading for others than the owner (vblkd --print-state, the
 * initramfs tools), while a vblkd may be writing: a consistent state. */
VbState *vb_state_read (const char *state_path, GError **error);

/* Changes whenever either file does (size and modification time): what a
 * vblkd taking over compares. */
char *vb_state_stamp (const char *state_path);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbStateStore, vb_state_store_free)

G_END_DECLS

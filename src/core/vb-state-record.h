/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Between the state file's writer, its reader and the journal
 * (vb-state-store.c): not for other users of vb-state.h. */
#pragma once

#include "vb-state.h"

G_BEGIN_DECLS

/* A journal record: one line of JSON in state.json's schema, with the names
 * the change deleted as "delete" and the devices it added or changed as
 * "devices". */
char *vb_state_record_to_json (const VbState *puts, GPtrArray *deletes);
/* Its strict reader (the checks of vb_state_from_json); the deleted names
 * are added to @deletes (char*, owned by it). */
VbState *vb_state_record_from_json (const char *text, gssize length, const char *origin,
                                    GPtrArray *deletes, GError **error);

/* The two halves of vb_state_save: the JSON of @state, NULL (an error
 * naming @path) when it would not load again; and its atomic, durable
 * write. */
char *vb_state_checked_json (const VbState *state, const char *path, GError **error);
gboolean vb_state_write_text (const char *path, const char *text, GError **error);
gboolean vb_state_fsync_directory (const char *dir, GError **error);

G_END_DECLS

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* NBD exports of started devices (see vb-exports.c). */
#pragma once

#include "vb-options.h" /* vb_export_spec_parse */
#include "nbd-tls.h"
#include "vb-reconcile.h"

G_BEGIN_DECLS

/* The TLS credentials @spec names, read and checked (NULL for tls=off). */
gboolean vb_export_tls_load (const VbExportSpec *spec, VbNbdTls **tls, GError **error);

typedef void (*VbExportFailFunc) (const char *device, const GError *error, gpointer user_data);

/* uuid -> export runtime */
GHashTable *vb_exports_new (void);

/* Serves every running device of @state on the addresses it lists and
 * stops what is no longer wanted. Worker thread. @fail hears of an export
 * that could not start. */
void vb_exports_sync (GHashTable *exports, const VbState *state, GHashTable *running,
                      VbExportFailFunc fail, gpointer user_data);

/* Stops the export of @uuid (before its block node goes away). */
void vb_exports_stop (GHashTable *exports, const char *uuid);

G_END_DECLS

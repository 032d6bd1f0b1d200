/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What D-Bus callers pass, checked before anything is done with it: a
 * method's options (a{sv}), a driver's attributes (a{ss}) and an export's
 * listen address. Pure GLib, so that fuzz-dbus can reach every branch. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Refuses unknown keys and wrong types: @allowed is "key:type" strings. */
gboolean vb_options_check (GVariant *options, const char *const *allowed, GError **error);
gboolean vb_options_get_bool (GVariant *options, const char *key, gboolean fallback);

/* a{ss} as a table of new strings (a key given twice: the last wins) */
GHashTable *vb_attributes_from_variant (GVariant *attributes);

/* Whether an export's clients may or must start TLS (the NBD server's
 * VbNbdTlsMode, in the same order). */
typedef enum {
  VB_EXPORT_TLS_OFF,
  VB_EXPORT_TLS_ALLOW,
  VB_EXPORT_TLS_REQUIRE,
} VbExportTls;

typedef struct {
  char *address;   /* unix:/ABSOLUTE/PATH (under 108 bytes) or tcp:HOST:PORT */
  VbExportTls tls; /* not off: exactly one of the credentials below */
  char *tls_psk;   /* a keys file (absolute path), or NULL */
  char *tls_certs; /* a certificate directory (absolute path), or NULL */
} VbExportSpec;

/* An export as the desired state keeps it:
 * "nbd ADDRESS[ tls=off|allow|require][ tls-psk=FILE| tls-certs=DIR]",
 * without tls= off unless credentials are given (then require): the
 * desired state of versions before TLS has no tls=. Parsed
 * into @out when not NULL (vb_export_spec_clear it). */
gboolean vb_export_spec_parse (const char *spec, VbExportSpec *out, GError **error);
/* The text vb_export_spec_parse reads back as @spec: tls= written unless
 * off on a unix socket. */
char *vb_export_spec_format (const VbExportSpec *spec);
void vb_export_spec_clear (VbExportSpec *spec);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (VbExportSpec, vb_export_spec_clear)
const char *vb_export_tls_name (VbExportTls tls);
/* "off", "allow" or "require" */
gboolean vb_export_tls_from_name (const char *name, VbExportTls *tls, GError **error);

G_END_DECLS

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

/* An export as the desired state keeps it, "nbd ADDRESS" with ADDRESS
 * unix:/ABSOLUTE/PATH (under 108 bytes) or tcp:HOST:PORT; the address into
 * *@address when not NULL. */
gboolean vb_export_spec_parse (const char *spec, char **address, GError **error);

G_END_DECLS

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* See vb-options.h. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-error.h"
#include "vb-options.h"

#include <string.h>

gboolean
vb_options_check (GVariant *options, const char *const *allowed, GError **error)
{
  GVariantIter iter;
  const char *key;
  GVariant *value;

  g_variant_iter_init (&iter, options);
  while (g_variant_iter_next (&iter, "{&sv}", &key, &value))
    {
      gboolean known = FALSE;
      for (guint i = 0; allowed && allowed[i]; i++)
        {
          const char *colon = strchr (allowed[i], ':');
          if (strncmp (allowed[i], key, colon - allowed[i]) != 0 || key[colon - allowed[i]] != '\0')
            continue;
          known = TRUE;
          if (strcmp (g_variant_get_type_string (value), colon + 1) != 0)
            {
              g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                           _ ("option '%s': expected type '%s', got '%s'"), key, colon + 1,
                           g_variant_get_type_string (value));
              g_variant_unref (value);
              return FALSE;
            }
        }
      g_variant_unref (value);
      if (!known)
        {
          g_autofree char *list = g_strjoinv (", ", (char **) allowed);
          g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                       _ ("option '%s': unknown (known: %s)"), key, *list ? list : "none");
          return FALSE;
        }
    }
  return TRUE;
}

GHashTable *
vb_attributes_from_variant (GVariant *attributes)
{
  GHashTable *h = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  GVariantIter iter;
  const char *k, *v;

  g_variant_iter_init (&iter, attributes);
  while (g_variant_iter_next (&iter, "{&s&s}", &k, &v))
    g_hash_table_insert (h, g_strdup (k), g_strdup (v));
  return h;
}

gboolean
vb_options_get_bool (GVariant *options, const char *key, gboolean fallback)
{
  gboolean value;

  if (options && g_variant_lookup (options, key, "b", &value))
    return value;
  return fallback;
}

static const char *const export_tls_names[] = { "off", "allow", "require" };

const char *
vb_export_tls_name (VbExportTls tls)
{
  g_return_val_if_fail (tls <= VB_EXPORT_TLS_REQUIRE, NULL);
  return export_tls_names[tls];
}

gboolean
vb_export_tls_from_name (const char *name, VbExportTls *tls, GError **error)
{
  for (guint i = 0; i < G_N_ELEMENTS (export_tls_names); i++)
    if (strcmp (name, export_tls_names[i]) == 0)
      {
        *tls = i;
        return TRUE;
      }
  g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
               _ ("tls '%s': expected off, allow or require"), name);
  return FALSE;
}

void
vb_export_spec_clear (VbExportSpec *spec)
{
  g_clear_pointer (&spec->address, g_free);
  g_clear_pointer (&spec->tls_psk, g_free);
  g_clear_pointer (&spec->tls_certs, g_free);
  spec->tls = VB_EXPORT_TLS_OFF;
}

static gboolean
export_address_check (const char *addr, GError **error)
{
  if (g_str_has_prefix (addr, "unix:/") && strlen (addr) < 5 + 108)
    return TRUE;
  if (g_str_has_prefix (addr, "tcp:") && strrchr (addr + 4, ':') != NULL)
    {
      const char *port = strrchr (addr + 4, ':') + 1;
      guint64 p = 0;
      if (!g_ascii_string_to_unsigned (port, 10, 1, 65535, &p, NULL) || port - 1 == addr + 4)
        {
          g_set_error (
              error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
              _ ("export '%s': listen address needs tcp:HOST:PORT with a port from 1 to 65535"),
              addr);
          return FALSE;
        }
      return TRUE;
    }
  g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
               _ ("listen '%s': expected unix:/ABSOLUTE/PATH (under 108 bytes) or tcp:HOST:PORT"),
               addr);
  return FALSE;
}

/* One KEY=VALUE of an export spec into @out; @seen_tls: tls= was given. */
static gboolean
export_setting (const char *spec, const char *setting, VbExportSpec *out, gboolean *seen_tls,
                GError **error)
{
  const char *eq = strchr (setting, '=');
  g_autofree char *key = eq ? g_strndup (setting, eq - setting) : g_strdup (setting);
  const char *value = eq ? eq + 1 : NULL;
  char **path = NULL;

  if (value == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("export '%s': '%s' is not KEY=VALUE"), spec, setting);
      return FALSE;
    }
  if (strcmp (key, "tls") == 0)
    {
      if (*seen_tls)
        goto twice;
      *seen_tls = TRUE;
      return vb_export_tls_from_name (value, &out->tls, error);
    }
  if (strcmp (key, "tls-psk") == 0)
    path = &out->tls_psk;
  else if (strcmp (key, "tls-certs") == 0)
    path = &out->tls_certs;
  else
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("export '%s': unknown setting '%s' (known: tls, tls-psk, tls-certs)"), spec,
                   key);
      return FALSE;
    }
  if (*path)
    goto twice;
  if (!g_path_is_absolute (value) || strlen (value) > 4096)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("export '%s': %s must be an absolute path of at most 4096 bytes"), spec, key);
      return FALSE;
    }
  *path = g_strdup (value);
  return TRUE;
twice:
  g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, _ ("export '%s': %s is given twice"),
               spec, key);
  return FALSE;
}

/* Whether @word is a setting (KEY=VALUE, KEY lower-case letters and
 * dashes) rather than the rest of a unix socket path with a space in it. */
static gboolean
is_setting (const char *word)
{
  gsize n = strspn (word, "abcdefghijklmnopqrstuvwxyz-");

  return n > 0 && word[n] == '=';
}

gboolean
vb_export_spec_parse (const char *spec, VbExportSpec *out, GError **error)
{
  VbExportSpec parsed = { NULL };
  g_auto (GStrv) words = NULL;
  gboolean seen_tls = FALSE;
  guint n, first;

  if (!g_str_has_prefix (spec, "nbd "))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("export '%s': only 'nbd ADDRESS' is known"), spec);
      return FALSE;
    }
  /* the settings are the words at the end; the address is what is before
   * them (a unix path may have a space, as before TLS) */
  words = g_strsplit (spec + 4, " ", -1);
  n = g_strv_length (words);
  for (first = n; first > 1 && is_setting (words[first - 1]); first--)
    ;
  {
    GString *address = g_string_new (n > 0 ? words[0] : "");
    for (guint i = 1; i < first; i++)
      g_string_append_printf (address, " %s", words[i]);
    parsed.address = g_string_free (address, FALSE);
  }
  if (!export_address_check (parsed.address, error))
    goto fail;
  for (guint i = first; i < n; i++)
    if (!export_setting (spec, words[i], &parsed, &seen_tls, error))
      goto fail;
  if (!seen_tls && (parsed.tls_psk || parsed.tls_certs))
    parsed.tls = VB_EXPORT_TLS_REQUIRE;
  if (parsed.tls_psk && parsed.tls_certs)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("export '%s': give tls-psk or tls-certs, not both"), spec);
      goto fail;
    }
  if (parsed.tls != VB_EXPORT_TLS_OFF && !parsed.tls_psk && !parsed.tls_certs)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("export '%s': tls=%s needs credentials: tls-psk=KEYS-FILE or "
                      "tls-certs=DIRECTORY"),
                   spec, vb_export_tls_name (parsed.tls));
      goto fail;
    }
  if (parsed.tls == VB_EXPORT_TLS_OFF && (parsed.tls_psk || parsed.tls_certs))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("export '%s': tls=off takes no credentials"), spec);
      goto fail;
    }
  if (out)
    *out = parsed;
  else
    vb_export_spec_clear (&parsed);
  return TRUE;
fail:
  vb_export_spec_clear (&parsed);
  return FALSE;
}

char *
vb_export_spec_format (const VbExportSpec *spec)
{
  /* plaintext on TCP is said out loud: it leaves the host */
  if (spec->tls == VB_EXPORT_TLS_OFF)
    return g_strconcat ("nbd ", spec->address,
                        g_str_has_prefix (spec->address, "tcp:") ? " tls=off" : "", NULL);
  return g_strdup_printf ("nbd %s tls=%s %s=%s", spec->address, vb_export_tls_name (spec->tls),
                          spec->tls_psk ? "tls-psk" : "tls-certs",
                          spec->tls_psk ? spec->tls_psk : spec->tls_certs);
}

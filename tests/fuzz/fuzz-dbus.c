/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzz target for what D-Bus callers pass, checked before it reaches the
 * desired state: device names (vb_name_is_valid, and the object paths made
 * of a name), component sources (vb_source_parse), sizes (vb_size_parse),
 * a driver's attributes (vb_attributes_from_variant then
 * vb_driver_resolve_attributes), a method's options (vb_options_check) and
 * an export's address (vb_export_spec_parse). The first byte picks the
 * check, the rest is its input: text as D-Bus carries it (UTF-8 without
 * NUL; anything else the bus refuses itself, and is skipped), or a
 * GVariant in its serialized form, read as untrusted data, as GDBus reads
 * a message. What a check accepts must be what it promises, each decided
 * here again by a rule of its own; what it refuses, one
 * VB_ERROR_INVALID_ARGUMENT whose message is UTF-8 (D-Bus carries no
 * other). Built for libFuzzer (clang) and for the standalone driver of
 * fuzz-main.c. */
#include "config.h"

#include "fuzz.h"

#include <limits.h>
#include <string.h>

#include "driver.h"
#include "vb-error.h"
#include "vb-options.h"
#include "vb-size.h"
#include "vb-util.h"

enum {
  CHECK_NAME,
  CHECK_SOURCE,
  CHECK_SIZE,
  CHECK_ATTRIBUTES,
  CHECK_OPTIONS,
  CHECK_EXPORT,
  N_CHECKS
};

/* options of several types, as the methods' lists are made */
static const char *const allowed[] = { "backend:s", "start:b", "timeout:u", "add:as", NULL };

static void
check_refusal (const GError *error)
{
  FUZZ_CHECK (error != NULL && error->domain == VB_ERROR);
  FUZZ_CHECK (error->code == VB_ERROR_INVALID_ARGUMENT);
  FUZZ_CHECK (g_utf8_validate (error->message, -1, NULL) && error->message[0] != '\0');
}

/* The name rule, said again: 1 to VB_NAME_MAX of A-Z a-z 0-9 . _ -, not
 * "." or "..". */
static gboolean
name_ok (const char *t)
{
  gsize n = strlen (t);

  if (n == 0 || n > VB_NAME_MAX || strcmp (t, ".") == 0 || strcmp (t, "..") == 0)
    return FALSE;
  return strspn (t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

static void
check_name (const char *t)
{
  g_autoptr (GError) error = NULL;
  gboolean ok = vb_name_is_valid (t, "name", &error);

  FUZZ_CHECK (ok == name_ok (t));
  if (!ok)
    {
      check_refusal (error);
      return;
    }
  {
    g_autofree char *path = vb_device_object_path (t);
    g_autofree char *cpath = vb_component_object_path (t, 7);
    g_autofree char *escaped = vb_object_path_escape (t);

    FUZZ_CHECK (g_variant_is_object_path (path) && g_variant_is_object_path (cpath));
    FUZZ_CHECK (g_str_has_suffix (path, escaped) && g_str_has_prefix (cpath, path));
  }
}

static void
check_source (const char *t)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *device = NULL;
  VbSourceKind kind;
  gboolean ok = vb_source_parse (t, &kind, &device, &error);
  gboolean nbd = g_str_has_prefix (t, "nbd://") || g_str_has_prefix (t, "nbd+unix://")
                 || g_str_has_prefix (t, "nbds://") || g_str_has_prefix (t, "nbd+tcp://");
  gboolean expected = g_str_has_prefix (t, "vblk:") ? name_ok (t + 5)
                      : nbd                         ? TRUE
                                                    : t[0] == '/' && strlen (t) < PATH_MAX;

  FUZZ_CHECK (ok == expected);
  if (!ok)
    {
      check_refusal (error);
      return;
    }
  if (g_str_has_prefix (t, "vblk:"))
    FUZZ_CHECK (kind == VB_SOURCE_DEVICE && strcmp (device, t + 5) == 0);
  else
    FUZZ_CHECK (kind == (nbd ? VB_SOURCE_NBD : VB_SOURCE_PATH) && device == NULL);
}

/* The size rule, said again: decimal digits, then K, M, G or T (any
 * case, powers of 1024) with "B" or "iB" after it or not, nothing else,
 * not above 2^64 - 1. What parses is that number, and vb_size_format
 * writes what parses to it again. */
static gboolean
size_of (const char *t, guint64 *v)
{
  static const char units[] = "KMGT";
  guint64 n = 0, mult = 1;
  const char *p = t, *u;

  if (!g_ascii_isdigit (*p))
    return FALSE;
  for (; g_ascii_isdigit (*p); p++)
    {
      if (n > (G_MAXUINT64 - (guint64) (*p - '0')) / 10)
        return FALSE;
      n = n * 10 + (guint64) (*p - '0');
    }
  if (*p != '\0' && (u = strchr (units, g_ascii_toupper (*p))) != NULL)
    {
      mult = G_GUINT64_CONSTANT (1) << (10 * (u - units + 1));
      p++;
      if (g_ascii_strcasecmp (p, "iB") == 0 || g_ascii_strcasecmp (p, "B") == 0)
        p += strlen (p);
    }
  if (*p != '\0' || (n != 0 && mult > G_MAXUINT64 / n))
    return FALSE;
  *v = n * mult;
  return TRUE;
}

static void
check_size (const char *t)
{
  g_autoptr (GError) error = NULL;
  guint64 v = 0, want = 0, again = 0;
  gboolean ok = vb_size_parse (t, &v, &error);

  FUZZ_CHECK (ok == size_of (t, &want));
  if (!ok)
    {
      check_refusal (error);
      return;
    }
  FUZZ_CHECK (v == want);
  {
    g_autofree char *shown = vb_size_format (v);
    FUZZ_CHECK (vb_size_parse (shown, &again, NULL) && again == v);
  }
}

/* what only an adopted mdadm array has */
static const char *const md1_only[] = { "md_version", "data_offset", "data_size", NULL };

/* Resolved attributes are the driver's own, canonical (canonicalizing
 * them again changes nothing), each given one as its canonical form. */
static void
check_attributes (const VbDriver *driver, GVariant *v)
{
  g_autoptr (GHashTable) given = vb_attributes_from_variant (v);
  g_autoptr (GError) error = NULL;
  g_autoptr (GHashTable) out = vb_driver_resolve_attributes (driver, NULL, given, &error);
  GHashTableIter iter;
  gpointer key, value;

  if (out == NULL)
    {
      check_refusal (error);
      return;
    }
  g_hash_table_iter_init (&iter, out);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      const VbAttrSpec *spec = vb_driver_attr_spec (driver, key);
      g_autofree char *again = NULL;
      const char *asked;
      FUZZ_CHECK (spec != NULL && value != NULL);
      again = vb_attr_canonicalize (spec, value, NULL);
      FUZZ_CHECK (again != NULL && strcmp (again, value) == 0);
      if ((asked = g_hash_table_lookup (given, key)) != NULL)
        {
          g_autofree char *canonical = vb_attr_canonicalize (spec, asked, NULL);
          FUZZ_CHECK (canonical != NULL && strcmp (canonical, value) == 0);
        }
    }
  /* every one given is kept, but what only an adopted mdadm array has,
   * dropped from any other device when it has its default value */
  g_hash_table_iter_init (&iter, given);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    FUZZ_CHECK (g_hash_table_contains (out, key)
                || (g_strv_contains (md1_only, key)
                    && g_strcmp0 (g_hash_table_lookup (out, "metadata"), "md1") != 0));
}

/* Options are taken exactly when every key is allowed with its type. */
static void
check_options (GVariant *v)
{
  g_autoptr (GError) error = NULL;
  gboolean ok = vb_options_check (v, allowed, &error);
  gboolean expected = TRUE;
  GVariantIter iter;
  const char *key;
  GVariant *value;

  g_variant_iter_init (&iter, v);
  while (g_variant_iter_next (&iter, "{&sv}", &key, &value))
    {
      g_autofree char *want = g_strdup_printf ("%s:%s", key, g_variant_get_type_string (value));
      expected &= g_strv_contains (allowed, want);
      g_variant_unref (value);
    }
  FUZZ_CHECK (ok == expected);
  if (!ok)
    check_refusal (error);
}

/* The address part of an export, as DESIGN.md writes it. */
static gboolean
model_export_address (const char *a)
{
  const char *port;
  guint64 p;

  if (g_str_has_prefix (a, "unix:/"))
    return strlen (a) < 5 + 108;
  return g_str_has_prefix (a, "tcp:") && (port = strrchr (a + 4, ':')) != NULL && port > a + 4
         && g_ascii_string_to_unsigned (port + 1, 10, 1, 65535, &p, NULL);
}

/* The settings after the address: each KEY=VALUE once, tls one of three,
 * the credentials absolute paths, exactly one of them unless tls=off
 * (which takes none); without tls= credentials mean require. */
static gboolean
model_export_settings (char **words, int *tls, const char **psk, const char **certs)
{
  gboolean seen_tls = FALSE;
  static const char *const modes[] = { "off", "allow", "require" };

  *tls = 0;
  *psk = *certs = NULL;
  for (guint i = 0; words[i]; i++)
    {
      const char *w = words[i], *v = strchr (w, '=');
      if (v == NULL)
        return FALSE;
      v++;
      if (g_str_has_prefix (w, "tls="))
        {
          gboolean known = FALSE;
          if (seen_tls)
            return FALSE;
          seen_tls = TRUE;
          for (int m = 0; m < 3; m++)
            if (strcmp (v, modes[m]) == 0)
              *tls = m, known = TRUE;
          if (!known)
            return FALSE;
        }
      else if (g_str_has_prefix (w, "tls-psk=") || g_str_has_prefix (w, "tls-certs="))
        {
          const char **slot = w[4] == 'p' ? psk : certs;
          if (*slot || v[0] != '/' || strlen (v) > 4096)
            return FALSE;
          *slot = v;
        }
      else
        return FALSE;
    }
  if (!seen_tls && (*psk || *certs))
    *tls = 2;
  if (*psk && *certs)
    return FALSE;
  return *tls == 0 ? !*psk && !*certs : *psk || *certs;
}

static void
check_export (const char *t)
{
  g_autoptr (GError) error = NULL;
  g_auto (VbExportSpec) spec = { NULL };
  gboolean ok = vb_export_spec_parse (t, &spec, &error);
  g_auto (GStrv) words = NULL;
  g_autofree char *address = NULL;
  const char *psk = NULL, *certs = NULL;
  gboolean expected = FALSE;
  int tls = 0;

  if (g_str_has_prefix (t, "nbd "))
    {
      /* settings: the words at the end that look like key=value (the
       * address, a unix path, may hold spaces) */
      guint n, first;
      words = g_strsplit (t + 4, " ", -1);
      n = g_strv_length (words);
      for (first = n; first > 1; first--)
        {
          const char *w = words[first - 1];
          const char *eq = strchr (w, '=');
          gboolean key_ok = eq != NULL && eq > w;
          for (const char *k = w; key_ok && k < eq; k++)
            key_ok = g_ascii_islower (*k) || *k == '-';
          if (!key_ok)
            break;
        }
      address = g_strdup (n > 0 ? words[0] : "");
      for (guint i = 1; i < first; i++)
        {
          char *longer = g_strconcat (address, " ", words[i], NULL);
          g_free (address);
          address = longer;
        }
      expected = model_export_address (address)
                 && model_export_settings (words + MIN (first, n), &tls, &psk, &certs);
    }
  FUZZ_CHECK (ok == expected);
  if (ok)
    {
      g_autofree char *again = vb_export_spec_format (&spec);
      g_auto (VbExportSpec) reread = { NULL };

      FUZZ_CHECK (strcmp (spec.address, address) == 0 && (int) spec.tls == tls);
      FUZZ_CHECK (g_strcmp0 (spec.tls_psk, psk) == 0 && g_strcmp0 (spec.tls_certs, certs) == 0);
      /* what is saved reads back as the same export */
      FUZZ_CHECK (vb_export_spec_parse (again, &reread, NULL));
      FUZZ_CHECK (strcmp (reread.address, spec.address) == 0 && reread.tls == spec.tls);
      FUZZ_CHECK (g_strcmp0 (reread.tls_psk, psk) == 0 && g_strcmp0 (reread.tls_certs, certs) == 0);
    }
  else
    check_refusal (error);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  guint check;
  g_autofree char *text = NULL;

  if (size == 0)
    return 0;
  check = data[0] % N_CHECKS;
  data++;
  size--;
  if (check == CHECK_ATTRIBUTES || check == CHECK_OPTIONS)
    {
      const VbDriver *const *drivers = vb_drivers ();
      guint n_drivers = 0, pick = size > 0 ? data[0] : 0;
      g_autoptr (GBytes) bytes = NULL;
      g_autoptr (GVariant) raw = NULL, v = NULL;

      while (drivers[n_drivers])
        n_drivers++;
      if (check == CHECK_ATTRIBUTES && size > 0)
        {
          data++;
          size--;
        }
      bytes = g_bytes_new (data, size);
      raw = g_variant_new_from_bytes (
          G_VARIANT_TYPE (check == CHECK_ATTRIBUTES ? "a{ss}" : "a{sv}"), bytes, FALSE);
      v = g_variant_get_normal_form (raw); /* (a full reference, not floating) */
      if (check == CHECK_ATTRIBUTES)
        check_attributes (drivers[pick % n_drivers], v);
      else
        check_options (v);
      return 0;
    }
  /* D-Bus strings: UTF-8, no NUL */
  if (memchr (data, 0, size) || !g_utf8_validate_len ((const char *) data, size, NULL))
    return 0;
  text = g_strndup ((const char *) data, size);
  switch (check)
    {
    case CHECK_NAME:
      check_name (text);
      break;
    case CHECK_SOURCE:
      check_source (text);
      break;
    case CHECK_SIZE:
      check_size (text);
      break;
    case CHECK_EXPORT:
      check_export (text);
      break;
    }
  return 0;
}

/* ---- seeds ---- */

static gboolean
write_seed (const char *dir, const char *name, guint check, const void *data, gsize len)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autofree guint8 *buf = g_malloc (len + 1);
  g_autoptr (GError) error = NULL;

  buf[0] = check;
  memcpy (buf + 1, data, len);
  if (!g_file_set_contents (path, (const char *) buf, len + 1, &error))
    {
      fprintf (stderr, "%s\n", error->message);
      return FALSE;
    }
  return TRUE;
}

static gboolean
write_text_seed (const char *dir, const char *name, guint check, const char *text)
{
  return write_seed (dir, name, check, text, strlen (text));
}

/* @v serialized, after a byte picking the driver when @driver >= 0. */
static gboolean
write_variant_seed (const char *dir, const char *name, guint check, gint driver, GVariant *v)
{
  g_autoptr (GVariant) sunk = g_variant_ref_sink (v);
  gsize plen = driver >= 0 ? 1 : 0, n = g_variant_get_size (sunk);
  g_autofree guint8 *buf = g_malloc (plen + n);

  if (driver >= 0)
    buf[0] = (guint8) driver;
  g_variant_store (sunk, buf + plen);
  return write_seed (dir, name, check, buf, plen + n);
}

int
vb_fuzz_write_seeds (const char *dir)
{
  const VbDriver *const *drivers = vb_drivers ();
  gboolean ok = TRUE;
  GVariantBuilder b;
  const char *add[] = { "/dev/sdb", NULL };

  ok &= write_text_seed (dir, "name", CHECK_NAME, "data-1.mirror_a");
  ok &= write_text_seed (dir, "name-long", CHECK_NAME,
                         "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                         "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                         "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                         "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9");
  ok &= write_text_seed (dir, "source-path", CHECK_SOURCE, "/dev/disk/by-id/wwn-0x5000");
  ok &= write_text_seed (dir, "source-device", CHECK_SOURCE, "vblk:mirror");
  ok &= write_text_seed (dir, "source-nbd", CHECK_SOURCE, "nbd+unix:///e?socket=/run/s");
  ok &= write_text_seed (dir, "size", CHECK_SIZE, "200GiB");
  ok &= write_text_seed (dir, "export-unix", CHECK_EXPORT, "nbd unix:/run/vblk/x.sock");
  ok &= write_text_seed (dir, "export-tcp", CHECK_EXPORT, "nbd tcp:[::1]:10809");
  ok &= write_text_seed (dir, "export-tls-psk", CHECK_EXPORT,
                         "nbd tcp:0.0.0.0:10809 tls=require tls-psk=/etc/vblk/keys.psk");
  ok &= write_text_seed (dir, "export-tls-certs", CHECK_EXPORT,
                         "nbd unix:/run/x.sock tls-certs=/etc/vblk/certs tls=allow");
  for (guint i = 0; drivers[i]; i++)
    {
      g_autofree char *name = g_strdup_printf ("attributes-%s", drivers[i]->name);
      g_variant_builder_init (&b, G_VARIANT_TYPE ("a{ss}"));
      for (const VbAttrSpec *a = drivers[i]->attributes; a && a->name; a++)
        g_variant_builder_add (&b, "{ss}", a->name, a->default_value ? a->default_value : "1");
      ok &= write_variant_seed (dir, name, CHECK_ATTRIBUTES, (gint) i, g_variant_builder_end (&b));
    }
  g_variant_builder_init (&b, G_VARIANT_TYPE ("a{sv}"));
  g_variant_builder_add (&b, "{sv}", "backend", g_variant_new_string ("loop"));
  g_variant_builder_add (&b, "{sv}", "timeout", g_variant_new_uint32 (5000));
  g_variant_builder_add (&b, "{sv}", "add", g_variant_new_strv (add, -1));
  g_variant_builder_add (&b, "{sv}", "start", g_variant_new_string ("yes"));
  ok &= write_variant_seed (dir, "options", CHECK_OPTIONS, -1, g_variant_builder_end (&b));
  return ok ? 0 : 1;
}

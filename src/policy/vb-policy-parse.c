/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Rule files -> rules. GKeyFile reads the syntax and unescapes the values;
 * it gives no line numbers, so a scan of our own finds the line of every
 * group header and key, and the line of a GKeyFile parse error is found by
 * bisecting over prefixes of the text. Every error is "FILE:LINE: ...". */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-error.h"
#include "vb-policy-private.h"
#include "vb-util.h"

#include <string.h>

#define ACTIONS "assemble, re-add, spare, replace, ignore"
#define KNOWN_KEYS                                                                                 \
  "match.PROPERTY, match.size, match.metadata, match.uuid, match.device, action, devices, "        \
  "start-degraded-after, domain"

static void set_error (GError **error, const char *file, guint line, const char *format, ...)
    G_GNUC_PRINTF (4, 5);

/* VB_ERROR_INVALID_ARGUMENT "FILE:LINE: message" */
static void
set_error (GError **error, const char *file, guint line, const char *format, ...)
{
  va_list args;
  g_autofree char *message = NULL;

  va_start (args, format);
  message = g_strdup_vprintf (_ (format), args);
  va_end (args);
  g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, "%s:%u: %s", file, line, message);
}

/* Characters: before GKeyFile sees the text, so that no line it would read
 * differently from our scan (a NUL, a lone CR, a vertical tab taken as part
 * of a key) gets through, and messages quoting values stay UTF-8. */
static gboolean
check_characters (const char *file, const char *text, gsize len, GError **error)
{
  guint line = 1;

  for (gsize start = 0; start < len; line++)
    {
      const char *nl = memchr (text + start, '\n', len - start);
      gsize end = nl != NULL ? (gsize) (nl - text) : len;

      if (!g_utf8_validate_len (text + start, end - start, NULL))
        {
          set_error (error, file, line, "not valid UTF-8");
          return FALSE;
        }
      for (gsize i = start; i < end; i++)
        {
          guchar c = text[i];

          if (c == '\t' || (c == '\r' && nl != NULL && i + 1 == end))
            continue;
          if (c < 0x20 || c == 0x7f)
            {
              set_error (error, file, line, "control character 0x%02x (only tabs are allowed)", c);
              return FALSE;
            }
        }
      start = end + 1;
    }
  return TRUE;
}

/* GKeyFile refused @text: find the first line whose prefix it refuses (the
 * parse is line by line, so refusal is monotonic in the prefix length). */
static void
locate_keyfile_error (const char *file, const char *text, gsize len, GError **error)
{
  g_autoptr (GArray) ends = g_array_new (FALSE, FALSE, sizeof (gsize));
  g_autofree char *message = NULL;
  guint lo = 1, hi;

  for (gsize i = 0; i < len; i++)
    if (text[i] == '\n')
      {
        gsize end = i + 1;
        g_array_append_val (ends, end);
      }
  if (len > 0 && text[len - 1] != '\n')
    g_array_append_val (ends, len);
  hi = MAX (ends->len, 1);
  while (lo < hi)
    {
      guint mid = lo + (hi - lo) / 2;
      g_autoptr (GKeyFile) kf = g_key_file_new ();

      if (g_key_file_load_from_data (kf, text, g_array_index (ends, gsize, mid - 1),
                                     G_KEY_FILE_KEEP_TRANSLATIONS, NULL))
        lo = mid + 1;
      else
        hi = mid;
    }
  {
    g_autoptr (GKeyFile) kf = g_key_file_new ();
    g_autoptr (GError) local = NULL;
    gsize prefix = ends->len > 0 ? g_array_index (ends, gsize, lo - 1) : len;

    if (g_key_file_load_from_data (kf, text, prefix, G_KEY_FILE_KEEP_TRANSLATIONS, &local))
      message = g_strdup (VB_POLICY_NOT_UNDERSTOOD);
    else
      message = g_strdup (local->message);
  }
  set_error (error, file, lo, "%s", message);
}

/* The scan: where each group header and key is. */

typedef struct {
  char *key;
  guint line;
} ScanKey;

typedef struct {
  char *name; /* between [ and ] */
  guint line;
  GArray *keys; /* ScanKey */
} ScanGroup;

static void
scan_key_clear (ScanKey *k)
{
  g_free (k->key);
}

static void
scan_group_free (ScanGroup *g)
{
  g_free (g->name);
  g_array_unref (g->keys);
  g_free (g);
}

static gboolean
is_blank (char c)
{
  return c == ' ' || c == '\t';
}

/* Runs on text GKeyFile accepted, so each line is blank, a comment, a
 * group header or key=value; anything else is reported rather than
 * guessed at. */
static GPtrArray *
scan_text (const char *file, const char *text, gsize len, GError **error)
{
  g_autoptr (GPtrArray) groups = g_ptr_array_new_with_free_func ((GDestroyNotify) scan_group_free);
  guint line = 1;

  for (gsize start = 0; start < len; line++)
    {
      const char *nl = memchr (text + start, '\n', len - start);
      const char *p = text + start;
      const char *end = nl != NULL ? nl : text + len;

      start = (gsize) (end - text) + 1;
      if (end > p && end[-1] == '\r')
        end--;
      while (p < end && is_blank (*p))
        p++;
      while (end > p && is_blank (end[-1]))
        end--;
      if (p == end || *p == '#')
        continue;
      if (*p == '[' && end[-1] == ']' && end - p >= 2)
        {
          ScanGroup *g = g_new0 (ScanGroup, 1);

          g->name = g_strndup (p + 1, end - p - 2);
          g->line = line;
          g->keys = g_array_new (FALSE, FALSE, sizeof (ScanKey));
          g_array_set_clear_func (g->keys, (GDestroyNotify) scan_key_clear);
          g_ptr_array_add (groups, g);
          continue;
        }
      {
        const char *eq = memchr (p, '=', end - p);
        const char *key_end = eq;
        ScanKey k;

        if (eq == NULL || groups->len == 0)
          {
            set_error (error, file, line, VB_POLICY_NOT_UNDERSTOOD);
            return NULL;
          }
        while (key_end > p && is_blank (key_end[-1]))
          key_end--;
        k.key = g_strndup (p, key_end - p);
        k.line = line;
        g_array_append_val (((ScanGroup *) groups->pdata[groups->len - 1])->keys, k);
      }
    }
  return g_steal_pointer (&groups);
}

/* Values */

static gboolean
parse_size_match (const char *value, VbPolicyMatch *m)
{
  static const struct {
    const char *text;
    VbSizeOp op;
  } ops[] = {
    /* two-character operators first */
    { "<=", VB_SIZE_LE }, { ">=", VB_SIZE_GE }, { "<", VB_SIZE_LT },
    { ">", VB_SIZE_GT },  { "=", VB_SIZE_EQ },
  };

  for (guint i = 0; i < G_N_ELEMENTS (ops); i++)
    if (g_str_has_prefix (value, ops[i].text))
      {
        const char *size = value + strlen (ops[i].text);

        while (is_blank (*size))
          size++;
        m->op = ops[i].op;
        return vb_size_parse (size, &m->size, NULL);
      }
  return FALSE;
}

static gboolean
is_property_name (const char *name)
{
  if (*name == '\0')
    return FALSE;
  for (const char *p = name; *p; p++)
    if (!g_ascii_isalnum (*p) && *p != '_' && *p != '.')
      return FALSE;
  return TRUE;
}

static const char *const match_keywords[] = { "size", "metadata", "uuid", "device" };

/* match.* key @what (after "match.") = @value. */
static gboolean
parse_match (const char *what, const char *value, VbPolicyMatch *m, const char *file, guint line,
             GError **error)
{
  if (strcmp (what, "size") == 0)
    {
      m->kind = VB_MATCH_SIZE;
      if (!parse_size_match (value, m))
        {
          set_error (error, file, line,
                     "match.size: '%s' is not a size comparison (OP SIZE, OP one of < <= > >= =, "
                     "SIZE with K M G T)",
                     value);
          return FALSE;
        }
      m->pattern = g_strdup (value);
      return TRUE;
    }
  if (strcmp (what, "metadata") == 0)
    {
      m->kind = VB_MATCH_METADATA;
      if (!g_strv_contains ((const char *const[]){ "vblk", "none", "unknown", "any", NULL }, value))
        {
          set_error (error, file, line,
                     "match.metadata: '%s' is not a metadata kind (vblk, none, unknown or any)",
                     value);
          return FALSE;
        }
      m->pattern = g_strdup (value);
      return TRUE;
    }
  if (strcmp (what, "uuid") == 0 || strcmp (what, "device") == 0)
    {
      m->kind = strcmp (what, "uuid") == 0 ? VB_MATCH_UUID : VB_MATCH_DEVICE;
      if (*value == '\0')
        {
          set_error (error, file, line, "match.%s: empty value (a glob; * for any vblk superblock)",
                     what);
          return FALSE;
        }
      m->pattern = g_strdup (value);
      m->spec = g_pattern_spec_new (value);
      return TRUE;
    }
  /* An empty glob is allowed here: it matches a property set to "". */
  m->kind = VB_MATCH_PROPERTY;
  m->property = g_strdup (what);
  m->pattern = g_strdup (value);
  m->spec = g_pattern_spec_new (value);
  return TRUE;
}

static gboolean
parse_devices (const char *value, VbPolicyRule *r, const char *file, guint line, GError **error)
{
  g_auto (GStrv) items = g_strsplit (value, ",", -1);

  if (*value == '\0')
    {
      set_error (error, file, line, "devices: empty value (leave the key out for any device)");
      return FALSE;
    }
  for (guint i = 0; items[i] != NULL; i++)
    {
      g_autoptr (GError) local = NULL;

      g_strstrip (items[i]);
      if (!vb_name_is_valid (items[i], "devices", &local))
        {
          set_error (error, file, line, "%s", local->message);
          return FALSE;
        }
      for (guint j = 0; j < i; j++)
        if (strcmp (items[i], items[j]) == 0)
          {
            set_error (error, file, line, "devices: '%s' is listed twice", items[i]);
            return FALSE;
          }
    }
  r->devices = g_steal_pointer (&items);
  return TRUE;
}

/* Rules */

typedef struct {
  GPtrArray *rules;  /* VbPolicyRule* */
  GHashTable *names; /* name -> VbPolicyRule* of @rules */
} Loader;

/* The lines of the keys that only some actions take, checked once the
 * action is known. */
typedef struct {
  guint devices;
  guint start_degraded_after;
  guint domain;
  guint action;
} KeyLines;

static gboolean
check_action_keys (const VbPolicyRule *r, const KeyLines *lines, GError **error)
{
  const char *action = vb_policy_action_to_string (r->action);

  if (lines->action == 0)
    {
      set_error (error, r->file, r->line, "rule '%s' has no action= (one of %s)", r->name, ACTIONS);
      return FALSE;
    }
  if (lines->devices != 0 && r->action == VB_POLICY_IGNORE)
    {
      set_error (error, r->file, lines->devices,
                 "devices: has no meaning with action=ignore (rule '%s')", r->name);
      return FALSE;
    }
  if (lines->start_degraded_after != 0 && r->action != VB_POLICY_ASSEMBLE)
    {
      set_error (error, r->file, lines->start_degraded_after,
                 "start-degraded-after: only for action=assemble, rule '%s' has action=%s", r->name,
                 action);
      return FALSE;
    }
  if (lines->domain != 0 && r->action != VB_POLICY_SPARE && r->action != VB_POLICY_REPLACE)
    {
      set_error (error, r->file, lines->domain,
                 "domain: only for action=spare or action=replace, rule '%s' has action=%s",
                 r->name, action);
      return FALSE;
    }
  return TRUE;
}

/* The value of @key, unescaped by GKeyFile and trimmed. */
static char *
get_value (GKeyFile *kf, const ScanGroup *g, const ScanKey *k, const char *file, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autofree char *value = g_key_file_get_string (kf, g->name, k->key, &local);

  /* An invalid escape sets @local but still returns a value. */
  if (value == NULL || local != NULL)
    {
      if (g_error_matches (local, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE))
        set_error (error, file, k->line,
                   "%s: invalid escape sequence in the value (known: \\s \\n \\t \\r \\\\)",
                   k->key);
      else
        set_error (error, file, k->line, VB_POLICY_NOT_UNDERSTOOD);
      return NULL;
    }
  g_strstrip (value);
  for (const char *p = value; *p; p++)
    {
      if ((guchar) *p < 0x20 || *p == 0x7f)
        {
          set_error (error, file, k->line, "%s: control character in the value", k->key);
          return NULL;
        }
      /* GKeyFile has no comments after values; say so rather than match
       * (or fail to parse) "ata   # the SATA disks". */
      if (*p == '#' && p > value && is_blank (p[-1]))
        {
          set_error (error, file, k->line,
                     "%s: '%s' holds a comment: comments go on their own lines, starting with #",
                     k->key, value);
          return NULL;
        }
    }
  return g_steal_pointer (&value);
}

/* A match.WHAT key of rule @r. */
static gboolean
parse_match_key (GKeyFile *kf, const ScanGroup *g, const ScanKey *k, VbPolicyRule *r,
                 GError **error)
{
  const char *file = r->file;
  const char *key = k->key;
  const char *what = key + strlen ("match.");
  g_autofree char *value = NULL;
  g_autoptr (VbPolicyMatch) m = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (match_keywords); i++)
    if (g_ascii_strcasecmp (what, match_keywords[i]) == 0 && strcmp (what, match_keywords[i]))
      {
        set_error (error, file, k->line, "%s: write match.%s (match.* keywords are lower case)",
                   key, match_keywords[i]);
        return FALSE;
      }
  if (!is_property_name (what))
    {
      set_error (error, file, k->line,
                 "%s: '%s' is not a udev property name (letters, digits, _ and .)", key, what);
      return FALSE;
    }
  if ((value = get_value (kf, g, k, file, error)) == NULL)
    return FALSE;
  m = g_new0 (VbPolicyMatch, 1);
  m->line = k->line;
  if (!parse_match (what, value, m, file, k->line, error))
    return FALSE;
  g_ptr_array_add (r->matches, g_steal_pointer (&m));
  return TRUE;
}

static gboolean
parse_key (GKeyFile *kf, const ScanGroup *g, const ScanKey *k, VbPolicyRule *r, KeyLines *lines,
           GError **error)
{
  const char *file = r->file;
  const char *key = k->key;
  g_autofree char *value = NULL;

  if (g_str_has_prefix (key, "match."))
    return parse_match_key (kf, g, k, r, error);
  if (!g_strv_contains (
          (const char *const[]){ "action", "devices", "start-degraded-after", "domain", NULL },
          key))
    {
      set_error (error, file, k->line, "%s: unknown key (known: %s)", key, KNOWN_KEYS);
      return FALSE;
    }
  if ((value = get_value (kf, g, k, file, error)) == NULL)
    return FALSE;

  if (strcmp (key, "action") == 0)
    {
      lines->action = k->line;
      if (*value == '\0')
        {
          set_error (error, file, k->line, "action: empty value (one of %s)", ACTIONS);
          return FALSE;
        }
      if (!vb_policy_action_from_string (value, &r->action))
        {
          set_error (error, file, k->line, "action: '%s' is not an action (one of %s)", value,
                     ACTIONS);
          return FALSE;
        }
      return TRUE;
    }
  if (strcmp (key, "devices") == 0)
    {
      lines->devices = k->line;
      return parse_devices (value, r, file, k->line, error);
    }
  if (strcmp (key, "start-degraded-after") == 0)
    {
      lines->start_degraded_after = k->line;
      if (!vb_policy_parse_duration (value, &r->start_degraded_after_ms))
        {
          set_error (error, file, k->line,
                     "start-degraded-after: '%s' is not a duration (a number with ms, s, m or h; "
                     "0 or never for never)",
                     value);
          return FALSE;
        }
      return TRUE;
    }
  /* domain */
  {
    g_autoptr (GError) local = NULL;

    lines->domain = k->line;
    if (!vb_name_is_valid (value, "domain", &local))
      {
        set_error (error, file, k->line, "%s", local->message);
        return FALSE;
      }
    r->domain = g_steal_pointer (&value);
    return TRUE;
  }
}

static VbPolicyRule *
parse_group (Loader *loader, GKeyFile *kf, const ScanGroup *g, guint n_keys, const char *file,
             GError **error)
{
  g_autoptr (VbPolicyRule) r = NULL;
  g_autoptr (GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GError) local = NULL;
  const VbPolicyRule *other;
  KeyLines lines = { 0 };
  const char *name;

  if (!g_str_has_prefix (g->name, "rule "))
    {
      set_error (error, file, g->line, "[%s]: not a rule (groups are [rule NAME])", g->name);
      return NULL;
    }
  name = g->name + strlen ("rule ");
  if (!vb_name_is_valid (name, "rule name", &local))
    {
      set_error (error, file, g->line, "[%s]: %s", g->name, local->message);
      return NULL;
    }
  if ((other = g_hash_table_lookup (loader->names, name)) != NULL)
    {
      set_error (error, file, g->line, "rule '%s' is already defined at %s:%u", name, other->file,
                 other->line);
      return NULL;
    }

  r = vb_policy_rule_new (name, file, g->line);
  for (guint i = 0; i < g->keys->len; i++)
    {
      const ScanKey *k = &g_array_index (g->keys, ScanKey, i);
      const ScanKey *first = g_hash_table_lookup (seen, k->key);

      if (first != NULL)
        {
          set_error (error, file, k->line, "%s: set twice in rule '%s' (first at line %u)", k->key,
                     name, first->line);
          return NULL;
        }
      g_hash_table_insert (seen, k->key, (gpointer) k);
      if (!parse_key (kf, g, k, r, &lines, error))
        return NULL;
    }
  if (!check_action_keys (r, &lines, error))
    return NULL;
  /* Our scan and GKeyFile must have seen the same keys (GKeyFile merges
   * groups of the same name: @n_keys counts the keys of all of them). */
  {
    g_auto (GStrv) keys = g_key_file_get_keys (kf, g->name, NULL, NULL);

    if (keys == NULL || g_strv_length (keys) != n_keys)
      {
        set_error (error, file, g->line, VB_POLICY_NOT_UNDERSTOOD);
        return NULL;
      }
  }
  return g_steal_pointer (&r);
}

static gboolean
parse_text (Loader *loader, const char *file, const char *text, gsize len, GError **error)
{
  g_autoptr (GKeyFile) kf = g_key_file_new ();
  g_autoptr (GPtrArray) groups = NULL;
  g_autoptr (GHashTable) n_keys = NULL; /* group name -> keys in all its groups */

  if (!check_characters (file, text, len, error))
    return FALSE;
  /* KEEP_TRANSLATIONS: "key[de]" is otherwise dropped or kept depending on
   * the locale; kept, it is refused as an unknown key. */
  if (!g_key_file_load_from_data (kf, text, len, G_KEY_FILE_KEEP_TRANSLATIONS, NULL))
    {
      locate_keyfile_error (file, text, len, error);
      return FALSE;
    }
  if ((groups = scan_text (file, text, len, error)) == NULL)
    return FALSE;
  n_keys = g_hash_table_new (g_str_hash, g_str_equal);
  for (guint i = 0; i < groups->len; i++)
    {
      const ScanGroup *g = groups->pdata[i];
      guint n = GPOINTER_TO_UINT (g_hash_table_lookup (n_keys, g->name));

      g_hash_table_insert (n_keys, g->name, GUINT_TO_POINTER (n + g->keys->len));
    }
  for (guint i = 0; i < groups->len; i++)
    {
      const ScanGroup *g = groups->pdata[i];
      VbPolicyRule *r = parse_group (
          loader, kf, g, GPOINTER_TO_UINT (g_hash_table_lookup (n_keys, g->name)), file, error);

      if (r == NULL)
        return FALSE;
      g_ptr_array_add (loader->rules, r);
      g_hash_table_insert (loader->names, r->name, r);
    }
  return TRUE;
}

static void
loader_init (Loader *loader)
{
  loader->rules = g_ptr_array_new_with_free_func ((GDestroyNotify) vb_policy_rule_free);
  loader->names = g_hash_table_new (g_str_hash, g_str_equal);
}

static void
loader_clear (Loader *loader)
{
  g_clear_pointer (&loader->names, g_hash_table_unref);
  g_clear_pointer (&loader->rules, g_ptr_array_unref);
}

static VbPolicy *
loader_finish (Loader *loader)
{
  VbPolicy *p = vb_policy_new_take (g_steal_pointer (&loader->rules));

  loader_clear (loader);
  return p;
}

VbPolicy *
vb_policy_load_data (const char *file, const char *text, GError **error)
{
  Loader loader;

  g_return_val_if_fail (file != NULL, NULL);
  g_return_val_if_fail (text != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  loader_init (&loader);
  if (!parse_text (&loader, file, text, strlen (text), error))
    {
      loader_clear (&loader);
      return NULL;
    }
  return loader_finish (&loader);
}

static gboolean
load_file (Loader *loader, const char *path, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autofree char *contents = NULL;
  const char *nul;
  gsize len;

  if (!g_file_get_contents (path, &contents, &len, &local))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s", local->message);
      return FALSE;
    }
  if ((nul = memchr (contents, '\0', len)) != NULL)
    {
      guint line = 1;

      for (const char *p = contents; p < nul; p++)
        line += *p == '\n';
      set_error (error, path, line, "a NUL byte: not a text file");
      return FALSE;
    }
  return parse_text (loader, path, contents, len, error);
}

static void
collect_key (gpointer key, gpointer value, gpointer user_data)
{
  g_ptr_array_add (user_data, key);
}

VbPolicy *
vb_policy_load_dirs (const char *const *dirs, GError **error)
{
  /* file name -> the path that wins: the first directory that has it */
  g_autoptr (GHashTable) winner = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  g_autoptr (GPtrArray) names = g_ptr_array_new ();
  Loader loader;

  g_return_val_if_fail (dirs != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  for (guint k = 0; dirs[k] != NULL; k++)
    {
      g_autoptr (GError) local = NULL;
      const char *name;
      GDir *d = g_dir_open (dirs[k], 0, &local);

      if (d == NULL)
        {
          if (g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
            continue;
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s", local->message);
          return NULL;
        }
      while ((name = g_dir_read_name (d)) != NULL)
        if (name[0] != '.' && g_str_has_suffix (name, ".rules")
            && !g_hash_table_contains (winner, name))
          g_hash_table_insert (winner, g_strdup (name), g_build_filename (dirs[k], name, NULL));
      g_dir_close (d);
    }
  /* Name order across the directories, so that 10-site.rules comes before
   * 90-local.rules wherever each is. */
  g_hash_table_foreach (winner, collect_key, names);
  g_ptr_array_sort (names, vb_compare_string_pointers);

  loader_init (&loader);
  for (guint i = 0; i < names->len; i++)
    if (!load_file (&loader, g_hash_table_lookup (winner, names->pdata[i]), error))
      {
        loader_clear (&loader);
        return NULL;
      }
  return loader_finish (&loader);
}

VbPolicy *
vb_policy_load_dir (const char *dir, GError **error)
{
  const char *const dirs[] = { dir, NULL };

  g_return_val_if_fail (dir != NULL, NULL);
  return vb_policy_load_dirs (dirs, error);
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* state.json and state.journal (see vb-state-store.h). The journal:
 *
 *   vblk-journal 1 SHA256\n           SHA-256 (hex) of the state.json it follows
 *   SHA256 RECORD\n                   one per acknowledged change, SHA-256 of RECORD
 *
 * RECORD is one line of JSON in state.json's schema with "delete":
 * {"version":1,"delete":[NAME...],"devices":[DEVICE...]}. Replayed, the
 * deleted devices go, a changed device keeps its place and a new one comes
 * last; a change that would move devices otherwise is written whole. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-state-store.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vb-error.h"
#include "vb-state-record.h"

#define JOURNAL_MAGIC "vblk-journal 1 "
#define SUM_LEN 64
/* the journal is folded into state.json once it is this large, or as
 * large as state.json */
#define FOLD_MIN (32 * 1024)

struct _VbStateStore {
  char *state_path;
  char *journal_path;
  VbState *durable;    /* what the last load or commit left on disk */
  char *base;          /* SHA-256 of state.json as on disk, NULL when there is none */
  char *journal_base;  /* the state.json the journal on disk follows, NULL: no journal */
  gboolean appendable; /* the journal follows state.json and ends with a whole record */
  guint64 state_bytes;
  guint64 journal_bytes;
  guint64 written;
};

VbStateStore *
vb_state_store_new (const char *state_path)
{
  VbStateStore *store = g_new0 (VbStateStore, 1);
  g_autofree char *dir = g_path_get_dirname (state_path);

  store->state_path = g_strdup (state_path);
  store->journal_path = g_build_filename (dir, VB_STATE_JOURNAL_FILE, NULL);
  return store;
}

void
vb_state_store_free (VbStateStore *store)
{
  if (store == NULL)
    return;
  g_free (store->state_path);
  g_free (store->journal_path);
  g_clear_pointer (&store->durable, vb_state_free);
  g_free (store->base);
  g_free (store->journal_base);
  g_free (store);
}

const char *
vb_state_store_journal_path (VbStateStore *store)
{
  return store->journal_path;
}

guint64
vb_state_store_bytes_written (VbStateStore *store)
{
  return store->written;
}

static char *
sha256 (const char *data, gsize len)
{
  return g_compute_checksum_for_data (G_CHECKSUM_SHA256, (const guchar *) data, len);
}

static gboolean
is_sum (const char *p)
{
  for (guint i = 0; i < SUM_LEN; i++)
    if (!g_ascii_isxdigit (p[i]) || g_ascii_isupper (p[i]))
      return FALSE;
  return TRUE;
}

/* ------------------------------------------------------------------ */
/* Reading                                                              */

typedef struct {
  char *base; /* SHA-256 of state.json, NULL when there is none */
  guint64 state_bytes;
  char *journal_base; /* NULL: no journal */
  gboolean stale;     /* the journal follows another state.json: not replayed */
  gboolean cut;       /* its last record is cut: left out */
  guint64 journal_bytes;
} ReadInfo;

static void
read_info_clear (ReadInfo *info)
{
  g_free (info->base);
  g_free (info->journal_base);
  memset (info, 0, sizeof *info);
}

/* A record line: "SHA256 RECORD", the sum that of RECORD. */
static gboolean
record_sum_ok (const char *line, gsize len)
{
  g_autofree char *sum = NULL;

  if (len <= SUM_LEN + 1 || line[SUM_LEN] != ' ' || !is_sum (line))
    return FALSE;
  sum = sha256 (line + SUM_LEN + 1, len - SUM_LEN - 1);
  return memcmp (sum, line, SUM_LEN) == 0;
}

/* Applies one record to @state, whose devices @index finds by name
 * (deleted ones leave NULL in place until the replay ends). */
static gboolean
apply_record (VbState *state, GHashTable *index, const char *text, gsize len, const char *origin,
              GError **error)
{
  g_autoptr (GPtrArray) deletes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (VbState) puts = vb_state_record_from_json (text, (gssize) len, origin, deletes, error);
  gpointer *devices;
  gsize n = 0;

  if (puts == NULL)
    return FALSE;
  for (guint i = 0; i < deletes->len; i++)
    {
      const char *name = deletes->pdata[i];
      gpointer at;

      if (!g_hash_table_lookup_extended (index, name, NULL, &at))
        {
          g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                       _ ("%s: deletes device '%s', which the state does not have"), origin, name);
          return FALSE;
        }
      g_clear_pointer (&state->devices->pdata[GPOINTER_TO_UINT (at)], vb_device_config_free);
      g_hash_table_remove (index, name);
    }
  devices = g_ptr_array_steal (puts->devices, &n);
  vb_state_reindex (puts);
  for (gsize i = 0; i < n; i++)
    {
      VbDeviceConfig *d = devices[i];
      gpointer at;

      if (g_hash_table_lookup_extended (index, d->name, NULL, &at))
        {
          vb_device_config_free (state->devices->pdata[GPOINTER_TO_UINT (at)]);
          state->devices->pdata[GPOINTER_TO_UINT (at)] = d;
        }
      else
        {
          g_hash_table_insert (index, g_strdup (d->name), GUINT_TO_POINTER (state->devices->len));
          g_ptr_array_add (state->devices, d);
        }
    }
  g_free (devices);
  return TRUE;
}

/* No UUID twice (as vb_state_from_json checks within one file). */
static gboolean
check_uuids (const VbState *state, const char *origin, GError **error)
{
  g_autoptr (GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  for (guint i = 0; i < state->devices->len; i++)
    {
      const VbDeviceConfig *d = state->devices->pdata[i];
      char *lower;
      gpointer first;

      if (d->uuid == NULL)
        continue;
      lower = g_ascii_strdown (d->uuid, -1);
      if (g_hash_table_lookup_extended (seen, lower, NULL, &first))
        {
          g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                       _ ("%s: devices '%s' and '%s' have the same UUID %s"), origin,
                       (const char *) first, d->name, d->uuid);
          g_free (lower);
          return FALSE;
        }
      g_hash_table_insert (seen, lower, d->name);
    }
  return TRUE;
}

/* No UUID of @puts (the devices a change writes) twice in @next: the
 * rest of @next is what was saved, checked when it was (O(puts × N), no
 * table of every UUID at each change). */
static gboolean
check_put_uuids (const VbState *next, const VbState *puts, const char *origin, GError **error)
{
  for (guint p = 0; p < puts->devices->len; p++)
    {
      const VbDeviceConfig *put = puts->devices->pdata[p];
      gint at = vb_state_index_of (next, put->name);

      if (put->uuid == NULL)
        continue;
      for (guint i = 0; i < next->devices->len; i++)
        {
          const VbDeviceConfig *d = next->devices->pdata[i];
          /* (the first letters first: one call in sixteen) */
          if ((gint) i == at || d->uuid == NULL
              || g_ascii_tolower (d->uuid[0]) != g_ascii_tolower (put->uuid[0])
              || g_ascii_strcasecmp (d->uuid, put->uuid) != 0)
            continue;
          g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                       _ ("%s: devices '%s' and '%s' have the same UUID %s"), origin,
                       (gint) i < at ? d->name : put->name, (gint) i < at ? put->name : d->name,
                       (gint) i < at ? put->uuid : d->uuid);
          return FALSE;
        }
    }
  return TRUE;
}

/* Replays the journal @data onto @state (read from the state.json whose
 * SHA-256 is info->base). */
static gboolean
replay (VbState *state, const char *data, gsize len, const char *path, ReadInfo *info,
        GError **error)
{
  const gsize magic = strlen (JOURNAL_MAGIC);
  const char *nl = memchr (data, '\n', len);
  g_autoptr (GHashTable) index = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  gsize pos;
  guint line = 2, kept = 0;

  if (nl == NULL || (gsize) (nl - data) != magic + SUM_LEN
      || memcmp (data, JOURNAL_MAGIC, magic) != 0 || !is_sum (data + magic))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("%s:1: not a vblk journal (expected 'vblk-journal 1' and a SHA-256)"), path);
      return FALSE;
    }
  info->journal_base = g_strndup (data + magic, SUM_LEN);
  if (info->base == NULL || strcmp (info->journal_base, info->base) != 0)
    {
      info->stale = TRUE;
      info->journal_bytes = len;
      return TRUE;
    }

  for (guint i = 0; i < state->devices->len; i++)
    g_hash_table_insert (index, g_strdup (((VbDeviceConfig *) state->devices->pdata[i])->name),
                         GUINT_TO_POINTER (i));
  for (pos = (gsize) (nl - data) + 1; pos < len; line++)
    {
      const char *start = data + pos;
      const char *end = memchr (start, '\n', len - pos);
      gsize line_len = end ? (gsize) (end - start) : len - pos;
      g_autofree char *origin = NULL;

      if (end == NULL || !record_sum_ok (start, line_len))
        {
          /* a cut append is the last line; anything before another
           * record is damage, which is not guessed around */
          if (end != NULL && (gsize) (end - data) + 1 < len)
            {
              g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                           _ ("%s:%u: the record does not match its SHA-256, and records follow "
                              "it"),
                           path, line);
              return FALSE;
            }
          info->cut = TRUE;
          break;
        }
      origin = g_strdup_printf ("%s:%u", path, line);
      if (!apply_record (state, index, start + SUM_LEN + 1, line_len - SUM_LEN - 1, origin, error))
        return FALSE;
      pos += line_len + 1;
    }
  info->journal_bytes = pos;

  for (guint i = 0; i < state->devices->len; i++)
    {
      gpointer d = state->devices->pdata[i];

      state->devices->pdata[i] = NULL;
      if (d != NULL)
        state->devices->pdata[kept++] = d;
    }
  g_ptr_array_set_size (state->devices, kept);
  vb_state_reindex (state);
  return check_uuids (state, path, error);
}

/* @path's bytes; *text NULL when there is no such file. */
static gboolean
read_file (const char *path, char **text, gsize *len, GError **error)
{
  g_autoptr (GError) local = NULL;

  *text = NULL;
  *len = 0;
  if (g_file_get_contents (path, text, len, &local)
      || g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
    return TRUE;
  g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: %s", path, local->message);
  return FALSE;
}

/* The journal is read before state.json: if state.json is then the one it
 * follows, the two are one consistent state even while a vblkd folds the
 * journal in meanwhile (it replaces state.json first). */
static VbState *
read_pair (const char *state_path, const char *journal_path, ReadInfo *info, GError **error)
{
  g_autoptr (VbState) state = NULL;
  g_autofree char *journal = NULL;
  g_autofree char *text = NULL;
  gsize journal_len, len;

  if (!read_file (journal_path, &journal, &journal_len, error)
      || !read_file (state_path, &text, &len, error))
    return NULL;
  if (text == NULL)
    state = vb_state_new ();
  else
    {
      state = vb_state_from_json (text, (gssize) len, state_path, error);
      if (state == NULL)
        return NULL;
      info->base = sha256 (text, len);
      info->state_bytes = len;
    }
  if (journal && !replay (state, journal, journal_len, journal_path, info, error))
    return NULL;
  return g_steal_pointer (&state);
}

VbState *
vb_state_store_load (VbStateStore *store, GError **error)
{
  ReadInfo info = { 0 };
  VbState *state;

  g_return_val_if_fail (store != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  state = read_pair (store->state_path, store->journal_path, &info, error);
  if (state == NULL)
    {
      read_info_clear (&info);
      return NULL;
    }
  if (info.stale)
    g_message ("vblk: %s follows an older %s: left out", store->journal_path, store->state_path);
  if (info.cut)
    g_message ("vblk: %s: its last record was cut (a change never acknowledged): left out",
               store->journal_path);
  g_clear_pointer (&store->durable, vb_state_free);
  store->durable = vb_state_share (state);
  g_free (store->base);
  store->base = g_steal_pointer (&info.base);
  g_free (store->journal_base);
  store->journal_base = g_steal_pointer (&info.journal_base);
  /* a journal is begun only after a state.json */
  store->appendable = store->base != NULL && !info.stale && !info.cut;
  store->state_bytes = info.state_bytes;
  store->journal_bytes = store->journal_base ? info.journal_bytes : 0;
  read_info_clear (&info);
  return state;
}

VbState *
vb_state_read (const char *state_path, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (state_path);
  g_autofree char *journal_path = g_build_filename (dir, VB_STATE_JOURNAL_FILE, NULL);

  /* a journal that follows another state.json was either folded in just
   * now (read again) or left by a crash (stale: left out) */
  for (guint attempt = 0;; attempt++)
    {
      ReadInfo info = { 0 };
      VbState *state = read_pair (state_path, journal_path, &info, error);
      gboolean again = state && info.stale && attempt < 10;

      read_info_clear (&info);
      if (!again)
        return state;
      vb_state_free (state);
      g_usleep (20 * 1000);
    }
}

char *
vb_state_stamp (const char *state_path)
{
  g_autofree char *dir = g_path_get_dirname (state_path);
  g_autofree char *journal_path = g_build_filename (dir, VB_STATE_JOURNAL_FILE, NULL);
  const char *paths[] = { state_path, journal_path };
  GString *s = g_string_new (NULL);

  for (guint i = 0; i < G_N_ELEMENTS (paths); i++)
    {
      struct stat st;

      if (stat (paths[i], &st) == 0)
        g_string_append_printf (s, "%lld.%09ld:%lld ", (long long) st.st_mtim.tv_sec,
                                st.st_mtim.tv_nsec, (long long) st.st_size);
      else
        g_string_append (s, "- ");
    }
  return g_string_free (s, FALSE);
}

/* ------------------------------------------------------------------ */
/* Writing                                                              */

/* The devices of @next that are new or differ from @prev (shared, in
 * @next's order; a config the caller kept is never changed in place,
 * vb_state_share, so what is durable is compared by pointer first), and
 * the names of those it no longer has. A config of @prev equal to
 * @next's but not the same is replaced by @next's: the next diff finds
 * it by pointer (a whole-daemon op's world is its own copy). FALSE when
 * replaying them would not give @next's order. One walk of both, names
 * looked up (vb_state_index_of) only where the configs differ. */
static gboolean
diff (VbState *prev, const VbState *next, VbState *puts, GPtrArray *deletes)
{
  guint j = 0;

  for (guint i = 0; i < prev->devices->len; i++)
    {
      VbDeviceConfig *p = prev->devices->pdata[i];
      VbDeviceConfig *d = j < next->devices->len ? next->devices->pdata[j] : NULL;

      if (p == d)
        {
          j++;
          continue;
        }
      if (vb_state_index_of (next, p->name) < 0)
        {
          g_ptr_array_add (deletes, g_strdup (p->name));
          continue;
        }
      /* those kept keep their order, at the front */
      if (d == NULL || strcmp (d->name, p->name) != 0)
        return FALSE;
      j++;
      if (!vb_device_config_equal (p, d))
        g_ptr_array_add (puts->devices, vb_device_config_ref (d));
      else
        {
          /* the same name in the same place: prev's index holds */
          prev->devices->pdata[i] = vb_device_config_ref (d);
          vb_device_config_free (p);
        }
    }
  for (; j < next->devices->len; j++)
    {
      VbDeviceConfig *d = next->devices->pdata[j];

      if (vb_state_index_of (prev, d->name) >= 0)
        return FALSE;
      g_ptr_array_add (puts->devices, vb_device_config_ref (d));
    }
  return TRUE;
}

static gboolean
record_reads_back (const VbState *back, GPtrArray *back_deletes, const VbState *puts,
                   GPtrArray *deletes)
{
  if (back->devices->len != puts->devices->len || back_deletes->len != deletes->len)
    return FALSE;
  for (guint i = 0; i < puts->devices->len; i++)
    if (!vb_device_config_equal (back->devices->pdata[i], puts->devices->pdata[i]))
      return FALSE;
  for (guint i = 0; i < deletes->len; i++)
    if (strcmp (back_deletes->pdata[i], deletes->pdata[i]) != 0)
      return FALSE;
  return TRUE;
}

/* The journal line of a change, checked to load again as it was meant. */
static char *
record_line (VbStateStore *store, const VbState *puts, GPtrArray *deletes, const VbState *next,
             GError **error)
{
  g_autofree char *text = vb_state_record_to_json (puts, deletes);
  g_autoptr (GPtrArray) back_deletes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GError) local = NULL;
  g_autoptr (VbState) back = NULL;
  g_autofree char *sum = NULL;

  back = vb_state_record_from_json (text, -1, "the change to save", back_deletes, &local);
  if (back != NULL && !record_reads_back (back, back_deletes, puts, deletes))
    g_set_error_literal (&local, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                         "the change reads back otherwise");
  if (back == NULL || local != NULL || !check_put_uuids (next, puts, "the state to save", &local))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("%s: not saved, it would not load again: %s"), store->journal_path,
                   local ? local->message : "?");
      return NULL;
    }
  sum = sha256 (text, strlen (text));
  return g_strconcat (sum, " ", text, "\n", NULL);
}

static gboolean
append (VbStateStore *store, const char *line, GError **error)
{
  gsize len = strlen (line), done = 0;
  int fd, saved = 0;

  if (store->journal_base == NULL)
    {
      /* a new journal appears whole, its first record in it */
      g_autofree char *text = g_strconcat (JOURNAL_MAGIC, store->base, "\n", line, NULL);

      if (!vb_state_write_text (store->journal_path, text, error))
        return FALSE;
      store->journal_base = g_strdup (store->base);
      store->journal_bytes = strlen (text);
      store->written += strlen (text);
      return TRUE;
    }
  fd = open (store->journal_path, O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0)
    saved = errno;
  while (fd >= 0 && saved == 0 && done < len)
    {
      ssize_t n = write (fd, line + done, len - done);

      if (n < 0 && errno != EINTR)
        saved = errno;
      else if (n > 0)
        done += (gsize) n;
    }
  if (fd >= 0 && saved == 0 && fdatasync (fd) < 0)
    saved = errno;
  if (saved != 0)
    {
      /* what was written is not acknowledged: away with it, and state.json
       * whole next time should that fail too */
      if (fd < 0 || ftruncate (fd, (off_t) store->journal_bytes) < 0 || fdatasync (fd) < 0)
        store->appendable = FALSE;
      if (fd >= 0)
        close (fd);
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: %s", store->journal_path,
                   g_strerror (saved));
      return FALSE;
    }
  close (fd);
  store->journal_bytes += len;
  store->written += len;
  return TRUE;
}

static gboolean
remove_journal (VbStateStore *store, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (store->journal_path);

  if (unlink (store->journal_path) < 0 && errno != ENOENT)
    {
      int saved = errno;

      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: %s", store->journal_path,
                   g_strerror (saved));
      return FALSE;
    }
  g_clear_pointer (&store->journal_base, g_free);
  store->journal_bytes = 0;
  return vb_state_fsync_directory (dir, error);
}

/* state.json whole, and the journal gone. */
static gboolean
write_whole (VbStateStore *store, const VbState *next, GError **error)
{
  g_autofree char *text = vb_state_checked_json (next, store->state_path, error);
  g_autofree char *sum = NULL;
  g_autoptr (GError) local = NULL;

  if (text == NULL)
    return FALSE;
  sum = sha256 (text, strlen (text));
  /* Whatever fails from here, what is on disk is no longer sure to be
   * what the store thinks: the next commit writes state.json whole again
   * (never appending to a journal that may follow another state.json). */
  store->appendable = FALSE;
  /* A journal that follows exactly this text must go first: it would
   * otherwise be replayed onto it, should removing it later not last. */
  if (store->journal_base && strcmp (store->journal_base, sum) == 0)
    {
      gboolean same = g_strcmp0 (store->base, sum) == 0;

      if (!remove_journal (store, error))
        return FALSE;
      /* ...and when state.json holds this text already, that is all */
      if (same)
        {
          store->appendable = TRUE;
          return TRUE;
        }
    }
  if (!vb_state_write_text (store->state_path, text, error))
    {
      /* it may have been renamed in: which text is there is not known */
      g_clear_pointer (&store->base, g_free);
      return FALSE;
    }
  g_free (store->base);
  store->base = g_steal_pointer (&sum);
  store->state_bytes = strlen (text);
  store->written += store->state_bytes;
  /* it follows the old state.json now: left out if it stays, and tried
   * again by the next commit, which writes whole until it is gone */
  if (store->journal_base && !remove_journal (store, &local))
    {
      g_message ("vblk: %s", local->message);
      return TRUE;
    }
  store->appendable = TRUE;
  return TRUE;
}

/* @durable after @puts and @deletes were made durable. */
static void
take_change (VbStateStore *store, VbState *puts, GPtrArray *deletes)
{
  VbState *durable = store->durable;

  for (guint i = 0; i < deletes->len; i++)
    {
      gint at = vb_state_index_of (durable, deletes->pdata[i]);
      if (at >= 0)
        g_ptr_array_remove_index (durable->devices, (guint) at);
      vb_state_reindex (durable);
    }
  for (guint i = 0; i < puts->devices->len; i++)
    {
      VbDeviceConfig *d = vb_device_config_ref (puts->devices->pdata[i]);
      gint at = vb_state_index_of (durable, d->name);

      if (at >= 0)
        {
          vb_device_config_free (durable->devices->pdata[at]);
          durable->devices->pdata[at] = d;
        }
      else
        g_ptr_array_add (durable->devices, d);
    }
}

gboolean
vb_state_store_commit (VbStateStore *store, const VbState *next, GError **error)
{
  g_autoptr (GPtrArray) deletes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (VbState) puts = vb_state_new ();

  g_return_val_if_fail (store != NULL && store->durable != NULL, FALSE);
  g_return_val_if_fail (next != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (store->appendable && diff (store->durable, next, puts, deletes))
    {
      g_autofree char *line = NULL;

      if (puts->devices->len == 0 && deletes->len == 0)
        return TRUE;
      line = record_line (store, puts, deletes, next, error);
      if (line == NULL)
        return FALSE;
      if (store->journal_bytes + strlen (line) < MAX (store->state_bytes, FOLD_MIN))
        {
          if (!append (store, line, error))
            return FALSE;
          take_change (store, puts, deletes);
          return TRUE;
        }
    }
  if (!write_whole (store, next, error))
    return FALSE;
  g_clear_pointer (&store->durable, vb_state_free);
  store->durable = vb_state_share (next);
  return TRUE;
}

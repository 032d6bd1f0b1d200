/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The policy rules: every key parsed, every error with its FILE:LINE, rule
 * directories (name order, duplicate names across files, a missing or
 * broken directory), evaluation (first match wins, globs, size operators at
 * their boundaries, metadata, superblock fields, missing properties) and
 * the rules shipped in data/policy deciding on a blank, a foreign and a
 * vblk disk. */
#include "config.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "vb-error.h"
#include "vb-policy.h"

#define F "/etc/vblk/policy.d/10-x.rules"

static VbPolicy *
load_ok (const char *text)
{
  g_autoptr (GError) error = NULL;
  VbPolicy *p = vb_policy_load_data (F, text, &error);

  g_assert_no_error (error);
  g_assert_nonnull (p);
  return p;
}

static char *
rule_string (VbPolicy *p, guint i)
{
  return vb_policy_rule_to_string (vb_policy_rule (p, i));
}

/* Parsing */

static void
test_every_key (void)
{
  g_autoptr (VbPolicy) p = load_ok ("# spares for the data devices\n"
                                    "\n"
                                    "[rule spare-pool]\n"
                                    "match.ID_BUS=ata\n"
                                    "match.size=>=100G\n"
                                    "match.metadata=none\n"
                                    "match.uuid=5d0f*\n"
                                    "match.device=da?a\n"
                                    "action=spare\n"
                                    "devices=data, backup\n"
                                    "domain=pool1\n"
                                    "[rule late]\n"
                                    "  action = assemble  \n"
                                    "start-degraded-after=90s\n");
  const VbPolicyRule *r = vb_policy_rule (p, 0);
  g_autofree char *s0 = rule_string (p, 0);
  g_autofree char *s1 = rule_string (p, 1);

  g_assert_cmpuint (vb_policy_n_rules (p), ==, 2);
  g_assert_cmpstr (r->name, ==, "spare-pool");
  g_assert_cmpstr (r->file, ==, F);
  g_assert_cmpuint (r->line, ==, 3);
  g_assert_cmpint (r->action, ==, VB_POLICY_SPARE);
  g_assert_cmpstrv (r->devices, ((const char *const[]){ "data", "backup", NULL }));
  g_assert_cmpstr (r->domain, ==, "pool1");
  g_assert_cmpuint (r->start_degraded_after_ms, ==, 0);
  g_assert_cmpstr (s0, ==,
                   "spare-pool (" F ":3): action=spare match.ID_BUS=ata match.size=>=100G "
                   "match.metadata=none match.uuid=5d0f* match.device=da?a devices=data,backup "
                   "domain=pool1");

  r = vb_policy_rule (p, 1);
  g_assert_cmpstr (r->name, ==, "late");
  g_assert_cmpuint (r->line, ==, 12);
  g_assert_cmpint (r->action, ==, VB_POLICY_ASSEMBLE);
  g_assert_null (r->devices);
  g_assert_null (r->domain);
  g_assert_cmpuint (r->start_degraded_after_ms, ==, 90000);
  g_assert_cmpstr (s1, ==, "late (" F ":12): action=assemble start-degraded-after=90s");
}

static void
test_actions (void)
{
  static const char *const names[] = { "assemble", "re-add", "spare", "replace", "ignore" };

  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree char *text = g_strdup_printf ("[rule r]\naction=%s\n", names[i]);
      g_autoptr (VbPolicy) p = load_ok (text);

      g_assert_cmpint (vb_policy_rule (p, 0)->action, ==, i);
      g_assert_cmpstr (vb_policy_action_to_string (i), ==, names[i]);
    }
}

static void
test_durations (void)
{
  static const struct {
    const char *text;
    guint64 ms;
  } good[] = {
    { "500ms", 500 }, { "30s", 30000 }, { "2m", 120000 },   { "1h", 3600000 },  { "0", 0 },
    { "never", 0 },   { "0s", 0 },      { "1500ms", 1500 }, { "90m", 5400000 },
  };
  static const char *const bad[] = { "30", "1d", "-1s", "s", "1.5s", "30 s", "", "30S", "ms" };

  for (guint i = 0; i < G_N_ELEMENTS (good); i++)
    {
      g_autofree char *text
          = g_strdup_printf ("[rule r]\naction=assemble\nstart-degraded-after=%s\n", good[i].text);
      g_autoptr (VbPolicy) p = load_ok (text);

      g_assert_cmpuint (vb_policy_rule (p, 0)->start_degraded_after_ms, ==, good[i].ms);
    }
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autofree char *text
          = g_strdup_printf ("[rule r]\naction=assemble\nstart-degraded-after=%s\n", bad[i]);
      g_autofree char *want = g_strdup_printf (
          F ":3: start-degraded-after: '%s' is not a duration (a number with ms, s, m or h; 0 or "
            "never for never)",
          bad[i]);
      g_autoptr (GError) error = NULL;

      g_assert_null (vb_policy_load_data (F, text, &error));
      g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
      g_assert_cmpstr (error->message, ==, want);
    }
}

static void
test_size_syntax (void)
{
  static const struct {
    const char *text, *canonical;
  } good[] = {
    { ">=100G", ">=100G" },       { "< 2T", "<2T" },  { "<=1536KiB", "<=1536K" },
    { "=4096", "=4K" },           { ">1MB", ">1M" },  { "=1k", "=1K" },
    { ">  1gib", ">1G" },         { "=123", "=123" }, { "<=0", "<=0" },
    { ">=1048577", ">=1048577" },
  };
  static const char *const bad[] = { ">=10Q",
                                     "100G",
                                     ">=",
                                     "=>1G",
                                     ">=1B",
                                     ">= -1G",
                                     "==1G",
                                     "<1G2",
                                     "<G",
                                     "",
                                     ">=99999999999999999999",
                                     ">=99999999T" };

  for (guint i = 0; i < G_N_ELEMENTS (good); i++)
    {
      g_autofree char *text
          = g_strdup_printf ("[rule r]\nmatch.size=%s\naction=spare\n", good[i].text);
      g_autoptr (VbPolicy) p = load_ok (text);
      g_autofree char *s = rule_string (p, 0);
      g_autofree char *want
          = g_strdup_printf ("r (" F ":1): action=spare match.size=%s", good[i].canonical);

      g_assert_cmpstr (s, ==, want);
    }
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autofree char *text = g_strdup_printf ("[rule r]\n\nmatch.size=%s\naction=spare\n", bad[i]);
      g_autofree char *want
          = g_strdup_printf (F ":3: match.size: '%s' is not a size comparison (OP "
                               "SIZE, OP one of < <= > >= =, SIZE with K M G T)",
                             bad[i]);
      g_autoptr (GError) error = NULL;

      g_assert_null (vb_policy_load_data (F, text, &error));
      g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
      g_assert_cmpstr (error->message, ==, want);
    }
}

static void
test_syntax_accepted (void)
{
  /* CRLF, indentation, blanks around '=', GKeyFile escapes, an empty file,
   * comments only, no final newline. */
  g_autoptr (VbPolicy) p = load_ok ("\t# tabbed comment\r\n"
                                    "  [rule a]  \r\n"
                                    "\tmatch.ID_MODEL = Some\\sDisk\r\n"
                                    "action\t=\tignore\r\n"
                                    "[rule b]\n"
                                    "action=re-add");
  g_autoptr (VbPolicy) empty = load_ok ("");
  g_autoptr (VbPolicy) comments = load_ok ("# nothing\n\n   \n# here\n");
  g_autofree char *s = rule_string (p, 0);

  g_assert_cmpuint (vb_policy_n_rules (p), ==, 2);
  g_assert_cmpstr (s, ==, "a (" F ":2): action=ignore match.ID_MODEL=Some Disk");
  g_assert_cmpuint (vb_policy_rule (p, 1)->line, ==, 5);
  g_assert_cmpuint (vb_policy_n_rules (empty), ==, 0);
  g_assert_cmpuint (vb_policy_n_rules (comments), ==, 0);
}

/* Errors: the exact "FILE:LINE: message" (a glob for GLib's own texts). */
static const struct {
  const char *id, *text, *message;
} errors[] = {
  { "key-before-group", "# x\naction=ignore\n", F ":2: *start with a group*" },
  { "not-key-value", "[rule a]\naction=ignore\nbad line\n", F ":3: *bad line*" },
  { "not-key-value-last", "[rule a]\naction=ignore\n\n# c\nmatch.ID_BUS", F ":5: *match.ID_BUS*" },
  { "group-garbage", "[rule a]\naction=ignore\n[rule b] x\n", F ":3: *[rule b] x*" },
  { "empty-group", "[rule a]\naction=ignore\n[]\n", F ":3: *" },
  { "key-name", "[rule a]\naction=ignore\nx[=1\n", F ":3: *x[*" },
  { "not-rule", "[rule a]\naction=ignore\n[foo]\naction=ignore\n",
    F ":3: [foo]: not a rule (groups are [rule NAME])" },
  { "rule-no-name", "[rule]\naction=ignore\n",
    F ":1: [rule]: not a rule (groups are [rule NAME])" },
  { "rule-name", "\n[rule a b]\naction=ignore\n",
    F ":2: [rule a b]: rule name 'a b': character 2 is not allowed (allowed: A-Z a-z 0-9 . _ -)" },
  { "duplicate-rule", "[rule a]\naction=ignore\n\n[rule a]\naction=spare\n",
    F ":4: rule 'a' is already defined at " F ":1" },
  { "no-action", "[rule a]\nmatch.ID_BUS=ata\n[rule b]\nmatch.ID_BUS=usb\n",
    F ":1: rule 'a' has no action= (one of assemble, re-add, spare, replace, ignore)" },
  { "empty-action", "[rule a]\nmatch.ID_BUS=ata\naction=\n",
    F ":3: action: empty value (one of assemble, re-add, spare, replace, ignore)" },
  { "bad-action", "[rule a]\naction=readd\n",
    F ":2: action: 'readd' is not an action (one of assemble, re-add, spare, replace, ignore)" },
  { "unknown-key", "[rule a]\naction=ignore\ndevice=data\n",
    F ":3: device: unknown key (known: match.PROPERTY, match.size, match.metadata, match.uuid, "
      "match.device, action, devices, start-degraded-after, domain)" },
  { "locale-key", "[rule a]\naction=ignore\naction[de]=x\n", F ":3: action[de]: unknown key *" },
  { "duplicate-key", "[rule a]\naction=ignore\nmatch.ID_BUS=ata\naction=spare\n",
    F ":4: action: set twice in rule 'a' (first at line 2)" },
  { "duplicate-match", "[rule a]\nmatch.size=>1G\naction=spare\nmatch.size=<2G\n",
    F ":4: match.size: set twice in rule 'a' (first at line 2)" },
  { "property-name", "[rule a]\naction=ignore\nmatch.ID BUS=ata\n",
    F ":3: match.ID BUS: 'ID BUS' is not a udev property name (letters, digits, _ and .)" },
  { "property-empty", "[rule a]\naction=ignore\nmatch.=ata\n",
    F ":3: match.: '' is not a udev property name (letters, digits, _ and .)" },
  { "keyword-case", "[rule a]\naction=ignore\nmatch.Size=>1G\n",
    F ":3: match.Size: write match.size (match.* keywords are lower case)" },
  { "metadata", "[rule a]\naction=ignore\nmatch.metadata=ext4\n",
    F ":3: match.metadata: 'ext4' is not a metadata kind (vblk, none, unknown or any)" },
  { "uuid-empty", "[rule a]\naction=ignore\nmatch.uuid=\n",
    F ":3: match.uuid: empty value (a glob; * for any vblk superblock)" },
  { "device-empty", "[rule a]\naction=ignore\nmatch.device= \n",
    F ":3: match.device: empty value (a glob; * for any vblk superblock)" },
  { "devices-empty", "[rule a]\naction=spare\ndevices=\n",
    F ":3: devices: empty value (leave the key out for any device)" },
  { "devices-name", "[rule a]\naction=spare\ndevices=data,my disk\n",
    F ":3: devices 'my disk': character 3 is not allowed (allowed: A-Z a-z 0-9 . _ -)" },
  { "devices-hole", "[rule a]\naction=spare\ndevices=data,,backup\n",
    F ":3: devices: must not be empty" },
  { "devices-twice", "[rule a]\naction=spare\ndevices=data,backup,data\n",
    F ":3: devices: 'data' is listed twice" },
  { "domain-name", "[rule a]\naction=spare\ndomain=pool/1\n",
    F ":3: domain 'pool/1': character 5 is not allowed (allowed: A-Z a-z 0-9 . _ -)" },
  { "degraded-not-assemble", "[rule a]\nstart-degraded-after=30s\naction=spare\n",
    F ":2: start-degraded-after: only for action=assemble, rule 'a' has action=spare" },
  { "domain-not-spare", "[rule a]\naction=assemble\ndomain=pool1\n",
    F ":3: domain: only for action=spare or action=replace, rule 'a' has action=assemble" },
  { "devices-ignore", "[rule a]\ndevices=data\naction=ignore\n",
    F ":2: devices: has no meaning with action=ignore (rule 'a')" },
  { "trailing-comment", "[rule a]\nmatch.ID_BUS=ata   # SATA\naction=spare\n",
    F ":2: match.ID_BUS: 'ata   # SATA' holds a comment: comments go on their own lines, starting "
      "with #" },
  { "escape", "[rule a]\naction=ignore\nmatch.ID_MODEL=a\\qb\n",
    F ":3: match.ID_MODEL: invalid escape sequence in the value (known: \\s \\n \\t \\r \\\\)" },
  { "escaped-control", "[rule a]\naction=ignore\nmatch.ID_MODEL=a\\nb\n",
    F ":3: match.ID_MODEL: control character in the value" },
  { "utf8", "[rule a]\naction=ignore\n# caf\xe9\n", F ":3: not valid UTF-8" },
  { "control",
    "[rule a]\naction=ignore\n\x0b"
    "match.ID_BUS=ata\n",
    F ":3: control character 0x0b (only tabs are allowed)" },
  { "lone-cr", "[rule a]\raction=ignore\n",
    F ":1: control character 0x0d (only tabs are allowed)" },
  { "brief-example",
    "# site rules\n\n[rule big]\nmatch.ID_BUS=ata\naction=spare\n\nmatch.size=>=10Q\n",
    F ":7: match.size: '>=10Q' is not a size comparison (OP SIZE, OP one of < <= > >= =, SIZE "
      "with K M G T)" },
};

static void
test_error (gconstpointer data)
{
  guint i = GPOINTER_TO_UINT (data);
  g_autoptr (GError) error = NULL;

  g_assert_null (vb_policy_load_data (F, errors[i].text, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  if (!g_pattern_match_simple (errors[i].message, error->message))
    g_error ("%s: got \"%s\", want \"%s\"", errors[i].id, error->message, errors[i].message);
}

/* Rule directories */

static char *
make_dir (void)
{
  g_autoptr (GError) error = NULL;
  char *dir = g_dir_make_tmp ("test-policy-XXXXXX", &error);

  g_assert_no_error (error);
  return dir;
}

static void
write_file (const char *dir, const char *name, const char *text)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autoptr (GError) error = NULL;

  g_file_set_contents (path, text, -1, &error);
  g_assert_no_error (error);
}

static void
remove_dir (const char *dir)
{
  GDir *d = g_dir_open (dir, 0, NULL);
  const char *name;

  g_assert_nonnull (d);
  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);

      g_assert_cmpint (g_remove (path), ==, 0);
    }
  g_dir_close (d);
  g_assert_cmpint (g_rmdir (dir), ==, 0);
}

static void
test_dir_order (void)
{
  g_autofree char *dir = make_dir ();
  g_autoptr (GError) error = NULL;
  g_autoptr (VbPolicy) p = NULL;
  g_autofree char *path = NULL;
  static const char *const want[] = { "c1", "c2", "a1", "b1" };

  write_file (dir, "20-b.rules", "[rule b1]\naction=ignore\n");
  write_file (dir, "10-a.rules", "# a\n[rule a1]\naction=spare\n");
  write_file (dir, "05-c.rules", "[rule c1]\naction=assemble\n[rule c2]\naction=re-add\n");
  /* not rule files: skipped even when broken */
  write_file (dir, "README", "not a rule file\n");
  write_file (dir, "10-a.rules~", "[broken\n");
  write_file (dir, ".hidden.rules", "[broken\n");

  p = vb_policy_load_dir (dir, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (vb_policy_n_rules (p), ==, G_N_ELEMENTS (want));
  for (guint i = 0; i < G_N_ELEMENTS (want); i++)
    g_assert_cmpstr (vb_policy_rule (p, i)->name, ==, want[i]);
  path = g_build_filename (dir, "10-a.rules", NULL);
  g_assert_cmpstr (vb_policy_rule (p, 2)->file, ==, path);
  g_assert_cmpuint (vb_policy_rule (p, 2)->line, ==, 2);
  g_assert_cmpuint (vb_policy_rule (p, 1)->line, ==, 3);
  remove_dir (dir);
}

/* The administrator's directory over the vendor's: a name in the first
 * hides it in the second; a link to /dev/null hides it with nothing; the
 * files of both in one name order. */
static void
test_dir_override (void)
{
  g_autofree char *etc = make_dir ();
  g_autofree char *usr = make_dir ();
  g_autofree char *masked = g_build_filename (etc, "50-x.rules", NULL);
  g_autofree char *mine = g_build_filename (etc, "00-defaults.rules", NULL);
  g_autofree char *theirs = g_build_filename (usr, "70-z.rules", NULL);
  const char *const dirs[] = { etc, usr, NULL };
  static const char *const want[] = { "mine", "y", "z" };
  g_autoptr (GError) error = NULL;
  g_autoptr (VbPolicy) p = NULL;

  write_file (usr, "00-defaults.rules", "[rule vendor]\naction=ignore\n");
  write_file (usr, "50-x.rules", "[rule x]\naction=spare\n");
  write_file (usr, "70-z.rules", "[rule z]\naction=assemble\n");
  write_file (etc, "00-defaults.rules", "[rule mine]\naction=re-add\n");
  write_file (etc, "30-y.rules", "[rule y]\naction=ignore\n");
  g_assert_cmpint (symlink ("/dev/null", masked), ==, 0);

  p = vb_policy_load_dirs (dirs, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (vb_policy_n_rules (p), ==, G_N_ELEMENTS (want));
  for (guint i = 0; i < G_N_ELEMENTS (want); i++)
    g_assert_cmpstr (vb_policy_rule (p, i)->name, ==, want[i]);
  g_assert_cmpstr (vb_policy_rule (p, 0)->file, ==, mine);
  g_assert_cmpstr (vb_policy_rule (p, 2)->file, ==, theirs);
  remove_dir (etc);
  remove_dir (usr);
}

static void
test_dir_duplicate (void)
{
  g_autofree char *dir = make_dir ();
  g_autofree char *first = g_build_filename (dir, "10-a.rules", NULL);
  g_autofree char *second = g_build_filename (dir, "20-b.rules", NULL);
  g_autofree char *want
      = g_strdup_printf ("%s:2: rule 'x' is already defined at %s:4", second, first);
  g_autoptr (GError) error = NULL;

  write_file (dir, "10-a.rules", "[rule a]\naction=ignore\n\n[rule x]\naction=spare\n");
  write_file (dir, "20-b.rules", "# the same name\n[rule x]\naction=assemble\n");
  g_assert_null (vb_policy_load_dir (dir, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, want);
  remove_dir (dir);
}

static void
test_dir_missing (void)
{
  g_autofree char *dir = make_dir ();
  g_autofree char *missing = g_build_filename (dir, "policy.d", NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (VbPolicy) p = vb_policy_load_dir (missing, &error);
  g_autoptr (VbPolicy) empty = NULL;
  g_autoptr (VbPolicy) fresh = vb_policy_new_empty ();

  g_assert_no_error (error);
  g_assert_nonnull (p);
  g_assert_cmpuint (vb_policy_n_rules (p), ==, 0);
  g_assert_cmpuint (vb_policy_n_rules (fresh), ==, 0);
  /* an empty directory too */
  empty = vb_policy_load_dir (dir, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (vb_policy_n_rules (empty), ==, 0);
  remove_dir (dir);
}

static void
test_dir_broken (void)
{
  g_autofree char *dir = make_dir ();
  g_autofree char *broken = g_build_filename (dir, "50-broken.rules", NULL);
  g_autofree char *want = g_strdup_printf ("%s:3: action: 'spaer' is not an action (one of "
                                           "assemble, re-add, spare, replace, ignore)",
                                           broken);
  g_autoptr (GError) error = NULL;
  g_autoptr (VbPolicy) old = NULL;
  VbPolicy *again;

  write_file (dir, "10-good.rules", "[rule good]\naction=assemble\n");
  old = vb_policy_load_dir (dir, &error);
  g_assert_no_error (error);

  /* a later broken file: no policy at all, the caller keeps @old */
  write_file (dir, "50-broken.rules", "[rule bad]\nmatch.ID_BUS=ata\naction=spaer\n");
  g_assert_null (vb_policy_load_dir (dir, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, want);
  g_clear_error (&error);
  g_assert_cmpuint (vb_policy_n_rules (old), ==, 1);
  g_assert_cmpstr (vb_policy_rule (old, 0)->name, ==, "good");

  /* a NUL byte: not a text file, at its line */
  {
    static const char nul_text[] = "[rule bad]\n\naction=ig\0nore\n";

    g_assert_true (g_file_set_contents (broken, nul_text, sizeof nul_text - 1, NULL));
  }
  g_assert_null (vb_policy_load_dir (dir, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_true (g_str_has_prefix (error->message, broken));
  g_assert_true (g_str_has_suffix (error->message, ":3: a NUL byte: not a text file"));
  g_clear_error (&error);

  /* a rules "file" that is a directory: it cannot be read */
  g_assert_cmpint (g_remove (broken), ==, 0);
  g_assert_cmpint (g_mkdir (broken, 0755), ==, 0);
  g_assert_null (vb_policy_load_dir (dir, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, broken));
  g_clear_error (&error);
  g_assert_cmpint (g_rmdir (broken), ==, 0);

  /* the directory is a file */
  {
    g_autofree char *file = g_build_filename (dir, "10-good.rules", NULL);

    g_assert_null (vb_policy_load_dir (file, &error));
    g_assert_error (error, VB_ERROR, VB_ERROR_FAILED);
    g_assert_nonnull (strstr (error->message, file));
    g_clear_error (&error);
  }

  /* refcounting: the same object back */
  again = vb_policy_ref (old);
  g_assert_true (again == old);
  vb_policy_unref (again);
  remove_dir (dir);
}

/* Evaluation */

typedef struct {
  GHashTable *props;
  VbPolicyInput in;
} Disk;

static void
disk_init (Disk *d, const char *metadata, guint64 size)
{
  d->props = g_hash_table_new (g_str_hash, g_str_equal);
  d->in = (VbPolicyInput){ .properties = d->props, .size = size, .metadata = metadata };
}

static void
disk_clear (Disk *d)
{
  g_hash_table_unref (d->props);
}

/* The name of the rule that takes @d, or NULL; @why checked against the
 * glob @why_glob when not NULL. */
static const char *
decide (VbPolicy *p, const Disk *d, const char *why_glob)
{
  g_autofree char *why = NULL;
  const VbPolicyRule *r = vb_policy_evaluate (p, &d->in, &why);

  g_assert_nonnull (why);
  if (why_glob != NULL && !g_pattern_match_simple (why_glob, why))
    g_error ("why: got \"%s\", want \"%s\"", why, why_glob);
  return r != NULL ? r->name : NULL;
}

static void
test_first_match_wins (void)
{
  g_autoptr (VbPolicy) p = load_ok ("[rule spare-pool]\n"
                                    "match.ID_BUS=ata\n"
                                    "match.size=>=100G\n"
                                    "action=spare\n"
                                    "[rule any-ata]\n"
                                    "match.ID_BUS=ata\n"
                                    "action=ignore\n"
                                    "[rule everything]\n"
                                    "action=replace\n");
  Disk d;

  disk_init (&d, "none", G_GUINT64_CONSTANT (200) << 30);
  g_hash_table_insert (d.props, "ID_BUS", "ata");
  g_assert_cmpstr (
      decide (p, &d, "rule 'spare-pool' (" F ":1): ID_BUS=ata matches 'ata', size 200G >= 100G"),
      ==, "spare-pool");
  /* too small for the first: the second, though the third matches too */
  d.in.size = G_GUINT64_CONSTANT (50) << 30;
  g_assert_cmpstr (decide (p, &d, "rule 'any-ata' (" F ":5): ID_BUS=ata matches 'ata'"), ==,
                   "any-ata");
  /* a rule without match.* keys takes the rest */
  g_hash_table_insert (d.props, "ID_BUS", "usb");
  g_assert_cmpstr (
      decide (p, &d, "rule 'everything' (" F ":8): no match.* keys: matches every disk"), ==,
      "everything");
  disk_clear (&d);
}

static void
test_no_match_why (void)
{
  g_autoptr (VbPolicy) p = load_ok ("[rule vblk-components]\n"
                                    "match.metadata=vblk\n"
                                    "action=assemble\n"
                                    "[rule spare-pool]\n"
                                    "match.ID_BUS=ata\n"
                                    "match.size=>=100G\n"
                                    "action=spare\n"
                                    "[rule small]\n"
                                    "match.size=<1T\n"
                                    "match.ID_SERIAL=X*\n"
                                    "action=spare\n");
  g_autoptr (VbPolicy) none = vb_policy_new_empty ();
  Disk d;

  disk_init (&d, "none", G_GUINT64_CONSTANT (50) << 30);
  g_hash_table_insert (d.props, "ID_BUS", "ata");
  g_hash_table_insert (d.props, "ID_SERIAL", "WD-1");
  g_assert_null (decide (p, &d,
                         "no rule matched: 'vblk-components' needs metadata=vblk, the disk has "
                         "none; 'spare-pool' needs size >= 100G, the disk has 50G; 'small' needs "
                         "ID_SERIAL='X*', the disk has ID_SERIAL=WD-1"));
  g_assert_null (decide (none, &d, "no rule matched: there are no rules"));
  disk_clear (&d);
}

static void
test_globs (void)
{
  g_autoptr (VbPolicy) p = load_ok ("[rule star]\n"
                                    "match.ID_SERIAL=WDC_*_WD-*\n"
                                    "action=spare\n"
                                    "[rule question]\n"
                                    "match.ID_SERIAL=S?\n"
                                    "action=replace\n"
                                    "[rule empty]\n"
                                    "match.ID_SERIAL=\n"
                                    "action=ignore\n");
  static const struct {
    const char *serial, *rule;
  } cases[] = {
    { "WDC_WD40EFRX_WD-WCC7K0", "star" },
    { "WDC__WD-", "star" },
    { "WDC_WD40EFRX_XX-1", NULL },
    { "wdc_x_WD-1", NULL }, /* globs are case-sensitive */
    { "S1", "question" },
    { "S", NULL },
    { "S12", NULL },
    { "", "empty" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      Disk d;

      disk_init (&d, "none", 1 << 30);
      g_hash_table_insert (d.props, "ID_SERIAL", (char *) cases[i].serial);
      g_assert_cmpstr (decide (p, &d, NULL), ==, cases[i].rule);
      disk_clear (&d);
    }
}

static void
test_size_boundaries (void)
{
  static const struct {
    const char *op;
    gboolean below, at, above;
  } ops[] = {
    { "<", TRUE, FALSE, FALSE }, { "<=", TRUE, TRUE, FALSE }, { ">", FALSE, FALSE, TRUE },
    { ">=", FALSE, TRUE, TRUE }, { "=", FALSE, TRUE, FALSE },
  };
  const guint64 at = G_GUINT64_CONSTANT (100) << 30;

  for (guint i = 0; i < G_N_ELEMENTS (ops); i++)
    {
      g_autofree char *text
          = g_strdup_printf ("[rule r]\nmatch.size=%s100GiB\naction=spare\n", ops[i].op);
      g_autoptr (VbPolicy) p = load_ok (text);
      const guint64 sizes[] = { at - 1, at, at + 1 };
      const gboolean want[] = { ops[i].below, ops[i].at, ops[i].above };

      for (guint j = 0; j < G_N_ELEMENTS (sizes); j++)
        {
          Disk d;

          disk_init (&d, "none", sizes[j]);
          if ((decide (p, &d, NULL) != NULL) != want[j])
            g_error ("size %" G_GUINT64_FORMAT " %s 100G: want %d", sizes[j], ops[i].op, want[j]);
          disk_clear (&d);
        }
    }
  /* the extremes of a guint64 */
  {
    g_autoptr (VbPolicy) p = load_ok ("[rule zero]\nmatch.size=<=0\naction=ignore\n"
                                      "[rule huge]\nmatch.size=>=16383T\naction=ignore\n");
    Disk d;

    disk_init (&d, "none", 0);
    g_assert_cmpstr (decide (p, &d, "rule 'zero' (" F ":1): size 0 <= 0"), ==, "zero");
    d.in.size = G_MAXUINT64;
    g_assert_cmpstr (decide (p, &d, "rule 'huge' (*): size 18446744073709551615 >= 16383T"), ==,
                     "huge");
    disk_clear (&d);
  }
}

static void
test_metadata (void)
{
  static const char *const kinds[] = { "vblk", "none", "unknown", "any" };
  static const char *const disks[] = { "vblk", "none", "unknown" };

  for (guint i = 0; i < G_N_ELEMENTS (kinds); i++)
    {
      g_autofree char *text
          = g_strdup_printf ("[rule r]\nmatch.metadata=%s\naction=ignore\n", kinds[i]);
      g_autoptr (VbPolicy) p = load_ok (text);

      for (guint j = 0; j < G_N_ELEMENTS (disks); j++)
        {
          gboolean want = strcmp (kinds[i], "any") == 0 || strcmp (kinds[i], disks[j]) == 0;
          Disk d;

          disk_init (&d, disks[j], 1 << 30);
          g_assert_cmpint (decide (p, &d, NULL) != NULL, ==, want);
          disk_clear (&d);
        }
      /* metadata not known (NULL): only "any" */
      {
        Disk d;

        disk_init (&d, NULL, 1 << 30);
        g_assert_cmpint (decide (p, &d, NULL) != NULL, ==, strcmp (kinds[i], "any") == 0);
        disk_clear (&d);
      }
    }
}

static void
test_superblock_fields (void)
{
  g_autoptr (VbPolicy) p = load_ok ("[rule one]\n"
                                    "match.uuid=5d0f7a52-*\n"
                                    "match.device=data\n"
                                    "action=assemble\n"
                                    "[rule any-vblk]\n"
                                    "match.uuid=*\n"
                                    "action=re-add\n"
                                    "[rule named]\n"
                                    "match.device=back*\n"
                                    "action=assemble\n");
  Disk d;

  disk_init (&d, "vblk", 1 << 30);
  d.in.device_uuid = "5d0f7a52-2c4e-4b8e-9a51-0f6b3c2d1e00";
  d.in.device_name = "data";
  g_assert_cmpstr (decide (p, &d,
                           "rule 'one' (" F ":1): uuid=5d0f7a52-2c4e-4b8e-9a51-0f6b3c2d1e00 "
                           "matches '5d0f7a52-*', device=data matches 'data'"),
                   ==, "one");
  d.in.device_name = "backup";
  g_assert_cmpstr (decide (p, &d, NULL), ==, "any-vblk");
  d.in.device_uuid = "ffffffff-2c4e-4b8e-9a51-0f6b3c2d1e00";
  g_assert_cmpstr (decide (p, &d, NULL), ==, "any-vblk");
  /* no superblock: neither uuid nor device name, so nothing matches */
  d.in.device_uuid = NULL;
  d.in.device_name = NULL;
  d.in.metadata = "none";
  g_assert_null (decide (p, &d,
                         "no rule matched: 'one' needs uuid='5d0f7a52-*', the disk has no vblk "
                         "superblock; 'any-vblk' needs uuid='*', the disk has no vblk superblock; "
                         "'named' needs device='back*', the disk has no vblk superblock"));
  disk_clear (&d);
}

static void
test_missing_property (void)
{
  g_autoptr (VbPolicy) p = load_ok ("[rule ata]\nmatch.ID_BUS=*\naction=spare\n");
  Disk d;

  disk_init (&d, "none", 1 << 30);
  /* "*" matches any value, but not a property that is not there */
  g_assert_null (decide (p, &d, "no rule matched: 'ata' needs ID_BUS='*', the disk has no ID_BUS"));
  g_hash_table_insert (d.props, "ID_BUS", "");
  g_assert_cmpstr (decide (p, &d, NULL), ==, "ata");
  /* no property table at all */
  d.in.properties = NULL;
  g_assert_null (decide (p, &d, NULL));
  disk_clear (&d);
}

/* The rules shipped in data/policy. */

static const char *
defaults_path (void)
{
  const char *env = g_getenv ("VB_POLICY_DEFAULTS_RULES");

  return env != NULL ? env : VB_POLICY_DEFAULTS_RULES;
}

static void
test_shipped_defaults (void)
{
  g_autofree char *dir = g_path_get_dirname (defaults_path ());
  g_autoptr (GError) error = NULL;
  g_autoptr (VbPolicy) p = vb_policy_load_dir (dir, &error);
  const VbPolicyRule *r;
  Disk d;

  g_assert_no_error (error);
  g_assert_cmpuint (vb_policy_n_rules (p), >=, 2);
  g_assert_cmpstr (vb_policy_rule (p, 0)->file, ==, defaults_path ());

  /* a blank disk: nothing is done with it (no rule, or a rule that does
   * not assemble) */
  disk_init (&d, "none", G_GUINT64_CONSTANT (500) << 30);
  g_hash_table_insert (d.props, "ID_BUS", "ata");
  g_hash_table_insert (d.props, "DEVNAME", "/dev/sdx");
  r = vb_policy_evaluate (p, &d.in, NULL);
  g_assert_true (r == NULL || r->action != VB_POLICY_ASSEMBLE);
  g_assert_null (r);

  /* a file system on it: never touched */
  g_hash_table_insert (d.props, "ID_FS_TYPE", "ext4");
  d.in.metadata = "unknown";
  r = vb_policy_evaluate (p, &d.in, NULL);
  g_assert_nonnull (r);
  g_assert_cmpint (r->action, ==, VB_POLICY_IGNORE);
  g_assert_cmpstr (r->name, ==, "unknown-signature");

  /* a vblk component: assembled, never started degraded on its own */
  g_hash_table_remove (d.props, "ID_FS_TYPE");
  d.in.metadata = "vblk";
  d.in.device_uuid = "5d0f7a52-2c4e-4b8e-9a51-0f6b3c2d1e00";
  d.in.device_name = "data";
  r = vb_policy_evaluate (p, &d.in, NULL);
  g_assert_nonnull (r);
  g_assert_cmpint (r->action, ==, VB_POLICY_ASSEMBLE);
  g_assert_cmpuint (r->start_degraded_after_ms, ==, 0);
  disk_clear (&d);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/policy/parse/every-key", test_every_key);
  g_test_add_func ("/policy/parse/actions", test_actions);
  g_test_add_func ("/policy/parse/durations", test_durations);
  g_test_add_func ("/policy/parse/sizes", test_size_syntax);
  g_test_add_func ("/policy/parse/syntax-accepted", test_syntax_accepted);
  for (guint i = 0; i < G_N_ELEMENTS (errors); i++)
    {
      g_autofree char *name = g_strdup_printf ("/policy/error/%s", errors[i].id);

      g_test_add_data_func (name, GUINT_TO_POINTER (i), test_error);
    }
  g_test_add_func ("/policy/dir/order", test_dir_order);
  g_test_add_func ("/policy/dir/duplicate-across-files", test_dir_duplicate);
  g_test_add_func ("/policy/dir/override", test_dir_override);
  g_test_add_func ("/policy/dir/missing", test_dir_missing);
  g_test_add_func ("/policy/dir/broken", test_dir_broken);
  g_test_add_func ("/policy/evaluate/first-match-wins", test_first_match_wins);
  g_test_add_func ("/policy/evaluate/no-match-why", test_no_match_why);
  g_test_add_func ("/policy/evaluate/globs", test_globs);
  g_test_add_func ("/policy/evaluate/size-boundaries", test_size_boundaries);
  g_test_add_func ("/policy/evaluate/metadata", test_metadata);
  g_test_add_func ("/policy/evaluate/superblock-fields", test_superblock_fields);
  g_test_add_func ("/policy/evaluate/missing-property", test_missing_property);
  g_test_add_func ("/policy/defaults", test_shipped_defaults);
  return g_test_run ();
}

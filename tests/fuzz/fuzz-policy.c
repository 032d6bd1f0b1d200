/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzz target for the policy rule parser, the reader of files an
 * administrator (or a package) drops into /etc/vblk/policy.d. Any text must
 * either load or fail with one "FILE:LINE: message" naming a line of the
 * text; a policy that loads must describe each rule and decide on fixed
 * disks without crashing. Built for libFuzzer (clang) and for the standalone
 * driver of fuzz-main.c. */
#include "config.h"

#include "fuzz.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vb-error.h"
#include "vb-policy-private.h"


#define FILE_NAME "/etc/vblk/policy.d/fuzz.rules"

static void
check_error (const GError *error, const char *text)
{
  const char *p;
  char *end = NULL;
  guint64 line;
  guint n_lines = 1;

  FUZZ_CHECK (error != NULL && error->domain == VB_ERROR);
  FUZZ_CHECK (error->code == VB_ERROR_INVALID_ARGUMENT);
  /* Messages reach D-Bus callers, which take UTF-8 only. */
  FUZZ_CHECK (g_utf8_validate (error->message, -1, NULL));
  FUZZ_CHECK (g_str_has_prefix (error->message, FILE_NAME ":"));
  p = error->message + strlen (FILE_NAME ":");
  line = g_ascii_strtoull (p, &end, 10);
  FUZZ_CHECK (end != p && g_str_has_prefix (end, ": ") && end[2] != '\0');
  for (const char *c = text; *c; c++)
    n_lines += *c == '\n';
  FUZZ_CHECK (line >= 1 && line <= n_lines);
  /* The parser's own scan of the text and GKeyFile's must agree. */
  FUZZ_CHECK (strcmp (end + 2, VB_POLICY_NOT_UNDERSTOOD) != 0);
}

static void
evaluate_all (VbPolicy *policy)
{
  static const char *const metadata[] = { "vblk", "none", "unknown", NULL };
  g_autoptr (GHashTable) props = g_hash_table_new (g_str_hash, g_str_equal);

  g_hash_table_insert (props, "ID_BUS", "ata");
  g_hash_table_insert (props, "ID_SERIAL", "WDC_WD40EFRX-68N32N0_WD-WCC7K0000000");
  g_hash_table_insert (props, "DEVNAME", "/dev/sdb");
  g_hash_table_insert (props, "EMPTY", "");
  for (guint i = 0; i < G_N_ELEMENTS (metadata); i++)
    {
      VbPolicyInput in = {
        .properties = i == 1 ? NULL : props,
        .size = i == 0 ? G_MAXUINT64 : (G_GUINT64_CONSTANT (200) << 30) + i,
        .metadata = metadata[i],
        .device_uuid = i == 0 ? "5d0f7a52-2c4e-4b8e-9a51-0f6b3c2d1e00" : NULL,
        .device_name = i == 0 ? "data" : NULL,
      };
      g_autofree char *why = NULL;
      const VbPolicyRule *r = vb_policy_evaluate (policy, &in, &why);

      FUZZ_CHECK (why != NULL && g_utf8_validate (why, -1, NULL));
      if (r != NULL)
        FUZZ_CHECK (g_str_has_prefix (why, "rule '"));
      else
        FUZZ_CHECK (g_str_has_prefix (why, "no rule matched: "));
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  /* The text of a file ends at its first NUL for load_data. */
  g_autofree char *text = g_strndup ((const char *) data, size);
  g_autoptr (GError) error = NULL;
  g_autoptr (VbPolicy) policy = vb_policy_load_data (FILE_NAME, text, &error);

  if (policy == NULL)
    {
      check_error (error, text);
      return 0;
    }
  FUZZ_CHECK (error == NULL);
  for (guint i = 0; i < vb_policy_n_rules (policy); i++)
    {
      const VbPolicyRule *r = vb_policy_rule (policy, i);
      g_autofree char *s = vb_policy_rule_to_string (r);

      FUZZ_CHECK (r->name != NULL && strcmp (r->file, FILE_NAME) == 0 && r->line >= 1);
      FUZZ_CHECK (g_str_has_prefix (s, r->name) && g_utf8_validate (s, -1, NULL));
      FUZZ_CHECK (vb_policy_action_to_string (r->action) != NULL);
    }
  evaluate_all (policy);
  return 0;
}

/* Seeds: rule files using every key, in a few shapes. */

static const struct {
  const char *name;
  const char *text;
} seeds[] = {
  { "defaults.rules", "# the shipped defaults\n"
                      "[rule unknown-signature]\n"
                      "match.metadata=unknown\n"
                      "action=ignore\n"
                      "\n"
                      "[rule vblk-components]\n"
                      "match.metadata=vblk\n"
                      "action=assemble\n"
                      "start-degraded-after=0\n" },
  { "spares.rules", "[rule spare-pool]\n"
                    "match.ID_BUS=ata\n"
                    "match.size=>=100G\n"
                    "match.metadata=none\n"
                    "action=spare\n"
                    "devices=data,backup\n"
                    "domain=pool1\n"
                    "\n"
                    "[rule replace-usb]\n"
                    "match.ID_BUS=usb\n"
                    "match.ID_SERIAL=SanDisk_*\n"
                    "match.size=< 2T\n"
                    "action=replace\n"
                    "devices=data\n" },
  { "assemble.rules", "  # indented comment\n"
                      "[rule data-only]\n"
                      "match.uuid=5d0f7a52-*\n"
                      "match.device=da?a\n"
                      "action = assemble\n"
                      "start-degraded-after=30s\n"
                      "[rule back]\n"
                      "match.device=*\n"
                      "action=re-add\r\n"
                      "[rule catch-all]\n"
                      "action=ignore\n" },
  { "escapes.rules", "[rule odd]\n"
                     "match.ID_MODEL=Some\\sDisk*\n"
                     "match.EMPTY=\n"
                     "match.size=<=1536KiB\n"
                     "match.metadata=any\n"
                     "action=assemble\n"
                     "start-degraded-after=1500ms" },
};

int
vb_fuzz_write_seeds (const char *dir)
{
  for (guint i = 0; i < G_N_ELEMENTS (seeds); i++)
    {
      g_autofree char *path = g_build_filename (dir, seeds[i].name, NULL);
      g_autoptr (GError) error = NULL;
      g_autoptr (VbPolicy) policy = vb_policy_load_data (path, seeds[i].text, &error);

      if (policy == NULL)
        {
          fprintf (stderr, "seed %s is not valid: %s\n", seeds[i].name, error->message);
          return 1;
        }
      if (!g_file_set_contents (path, seeds[i].text, -1, &error))
        {
          fprintf (stderr, "%s\n", error->message);
          return 1;
        }
    }
  return 0;
}

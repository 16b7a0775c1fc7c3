#include "data/l10n_cleanup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace deepnet::data {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

TEST(L10nCleanupTest, NormalizeLocaleDropsTerritoriesExceptDistinctStandards) {
  EXPECT_EQ(NormalizeLocale("de"), "de");
  EXPECT_EQ(NormalizeLocale("de_DE"), "de");
  EXPECT_EQ(NormalizeLocale("de_CH"), "de");
  EXPECT_EQ(NormalizeLocale("pt_PT"), "pt");
  EXPECT_EQ(NormalizeLocale("de_DE.UTF-8"), "de");
  EXPECT_EQ(NormalizeLocale("pt_BR"), "pt_BR");
  EXPECT_EQ(NormalizeLocale("zh_CN"), "zh_CN");
  EXPECT_EQ(NormalizeLocale("zh_TW"), "zh_TW");
  EXPECT_EQ(NormalizeLocale("zh_HK"), "zh_HK");
  EXPECT_EQ(NormalizeLocale("zh_Hans"), "zh_CN");
  EXPECT_EQ(NormalizeLocale("zh_Hant"), "zh_TW");
  EXPECT_EQ(NormalizeLocale("pa_PK"), "pa_PK");  // Shahmukhi, not Gurmukhi.
  EXPECT_EQ(NormalizeLocale("bn_IN"), "bn");
  EXPECT_EQ(NormalizeLocale("ast"), "ast");
}

TEST(L10nCleanupTest, NormalizeLocaleMapsAliasesAndKeepsScriptModifiers) {
  EXPECT_EQ(NormalizeLocale("no"), "nb");
  EXPECT_EQ(NormalizeLocale("nb_NO"), "nb");
  EXPECT_EQ(NormalizeLocale("mo"), "ro");
  EXPECT_EQ(NormalizeLocale("sr@latin"), "sr@latin");
  EXPECT_EQ(NormalizeLocale("sr@Latn"), "sr@latin");
  EXPECT_EQ(NormalizeLocale("sr_RS@latin"), "sr@latin");
  EXPECT_EQ(NormalizeLocale("sr@ije"), "sr@ijekavian");
  EXPECT_EQ(NormalizeLocale("ca@valencia"), "ca@valencia");
  EXPECT_EQ(NormalizeLocale("uz@cyrillic"), "uz@cyrillic");
  EXPECT_EQ(NormalizeLocale("de_DE@euro"), "de");
}

TEST(L10nCleanupTest, NormalizeLocaleRejectsEnglishAndNonLocales) {
  for (const char* folder :
       {"en", "en_GB", "en_US.UTF-8", "en@quot", "en@boldquot", "en@shaw", "EN_au", "C", "POSIX",
        "", "locale.alias", "d1", "de_DEU_X", "x_", "de_1"}) {
    EXPECT_EQ(NormalizeLocale(folder), std::nullopt) << folder;
  }
}

TEST(L10nCleanupTest, IsFormatOnlyFindsStringsWithoutWords) {
  for (const char* s : {"",        " ",        "%s",        "%d",
                        "%1$s",    "%-5.2f",   "%lld",      "%%",
                        "%s: %s",  "%(name)s", "%1",        "{x}",
                        "{0}",     "{}",       "<b>%s</b>", "<a href=\"x\">%s</a>",
                        "&amp;",   "...",      "(%d)",      "%d%%",
                        "%s - %s", "…",        "«%s»",      "%s：%s",
                        "%s、%s",  "→",        "12:30",     "\t\n"}) {
    EXPECT_TRUE(IsFormatOnly(s)) << s;
  }
  for (const char* s : {"File", "%s files", "Open %s", "<b>Bold</b>", "{count} items", "Ä", "文件",
                        "файл", "%s KB", "&File", "x"}) {
    EXPECT_FALSE(IsFormatOnly(s)) << s;
  }
}

TEST(L10nCleanupTest, StripAcceleratorsRemovesGtkAndKdeMarkers) {
  EXPECT_EQ(StripAccelerators("_File"), "File");
  EXPECT_EQ(StripAccelerators("Save _As"), "Save As");
  EXPECT_EQ(StripAccelerators("E_xit"), "Exit");
  EXPECT_EQ(StripAccelerators("Da_tei"), "Datei");
  EXPECT_EQ(StripAccelerators("Ö_ffnen"), "Öffnen");
  EXPECT_EQ(StripAccelerators("_Файл"), "Файл");
  EXPECT_EQ(StripAccelerators("E&xit"), "Exit");
  EXPECT_EQ(StripAccelerators("&File"), "File");
  EXPECT_EQ(StripAccelerators("&Open && Close"), "Open && Close");  // Only the first.
}

TEST(L10nCleanupTest, StripAcceleratorsRemovesCjkMarkers) {
  EXPECT_EQ(StripAccelerators("ファイル(_F)"), "ファイル");
  EXPECT_EQ(StripAccelerators("文件 (&F)"), "文件");
  EXPECT_EQ(StripAccelerators("開く(_O)..."), "開く...");
  EXPECT_EQ(StripAccelerators("保存（_S）"), "保存");
  EXPECT_EQ(StripAccelerators("下線 (_) を付ける"), "下線 (_) を付ける");  // Not a marker.
}

TEST(L10nCleanupTest, StripAcceleratorsKeepsIdentifiersEntitiesAndLiterals) {
  EXPECT_EQ(StripAccelerators("UID_MIN"), "UID_MIN");
  EXPECT_EQ(StripAccelerators("Set LC_ALL first"), "Set LC_ALL first");
  EXPECT_EQ(StripAccelerators("the file_name field"), "the file_name field");
  EXPECT_EQ(StripAccelerators("__init__"), "__init__");
  EXPECT_EQ(StripAccelerators("_NET_WM_NAME"), "_NET_WM_NAME");
  EXPECT_EQ(StripAccelerators("»archive_library«"), "»archive_library«");
  EXPECT_EQ(StripAccelerators("language_COUNTRY"), "language_COUNTRY");
  EXPECT_EQ(StripAccelerators("trailing_"), "trailing_");
  EXPECT_EQ(StripAccelerators("Tom &amp; Jerry"), "Tom &amp; Jerry");
  EXPECT_EQ(StripAccelerators("Tom & Jerry"), "Tom & Jerry");
  EXPECT_EQ(StripAccelerators("AT&T syntax"), "AT&T syntax");
  EXPECT_EQ(StripAccelerators("a && b"), "a && b");
  // An identifier does not protect a real accelerator elsewhere in the string.
  EXPECT_EQ(StripAccelerators("Use UID_MIN for _Users"), "Use UID_MIN for Users");
}

TEST(L10nCleanupTest, CollapseWhitespaceLeavesNoTabsOrLineBreaks) {
  EXPECT_EQ(CollapseWhitespace("  a \t b\r\n\nc  "), "a b c");
  EXPECT_EQ(CollapseWhitespace("a\x01\x7f"
                               "b"),
            "a b");
  EXPECT_EQ(CollapseWhitespace(" \t\n "), "");
  EXPECT_EQ(CollapseWhitespace("x\xc2\xa0y"), "x\xc2\xa0y");  // NBSP is text, not a separator.
}

TEST(L10nCleanupTest, IsWrappedProseDetectsMidSentenceBreaks) {
  EXPECT_TRUE(
      IsWrappedProse("This program is free software; you can redistribute it\n"
                     "and/or modify it under the terms of the GPL."));
  EXPECT_TRUE(IsWrappedProse("Could not open the file because\nit is locked."));
  EXPECT_FALSE(IsWrappedProse("Usage: tool [OPTION]...\nCopy files."));
  EXPECT_FALSE(IsWrappedProse("Name\nSize\nDate"));
  EXPECT_FALSE(IsWrappedProse("First sentence.\nsecond starts lower-case after a period."));
  EXPECT_FALSE(IsWrappedProse("one line"));
}

TEST(L10nCleanupTest, SplitLinePairsOnlyWhenAligned) {
  EXPECT_THAT(SplitLinePairs("Name:\nSize:\n", "Name:\nGröße:\n"),
              ElementsAre(Pair("Name:", "Name:"), Pair("Size:", "Größe:")));
  // Different line counts: kept whole.
  EXPECT_THAT(SplitLinePairs("A.\nB.", "A und B."), ElementsAre(Pair("A.\nB.", "A und B.")));
  // Wrapped prose: kept whole even though the counts agree.
  EXPECT_THAT(SplitLinePairs("Cannot open\nthe file.", "Kann die Datei\nnicht öffnen."),
              ElementsAre(Pair("Cannot open\nthe file.", "Kann die Datei\nnicht öffnen.")));
  // Blank lines that do not coincide: kept whole.
  EXPECT_THAT(SplitLinePairs("A.\n\nB.", "A.\nB.\n"), ElementsAre(Pair("A.\n\nB.", "A.\nB.\n")));
  EXPECT_THAT(SplitLinePairs("One.", "Eins."), ElementsAre(Pair("One.", "Eins.")));
}

TEST(L10nCleanupTest, CleanMessagePairAppliesEveryRuleAndCounts) {
  std::vector<TextPair> out;
  CleanupStats stats;
  CleanMessagePair("_Open  File", "Datei  ö_ffnen", &out, &stats);
  CleanMessagePair("%s", "%s", &out, &stats);                 // Format-only.
  CleanMessagePair("Open %s", "%s", &out, &stats);            // Format-only target.
  CleanMessagePair("_OK", "OK", &out, &stats);                // Identical once stripped.
  CleanMessagePair("(_F)", "(_F)", &out, &stats);             // Empty once stripped.
  CleanMessagePair("Yes.\nNo.", "Ja.\nNein.", &out, &stats);  // Split.
  EXPECT_THAT(out, ElementsAre(Pair("Open File", "Datei öffnen"), Pair("Yes.", "Ja."),
                               Pair("No.", "Nein.")));
  EXPECT_EQ(stats.messages, 6);
  EXPECT_EQ(stats.split_messages, 1);
  EXPECT_EQ(stats.dropped_format_only, 2);
  EXPECT_EQ(stats.dropped_identical, 1);
  EXPECT_EQ(stats.dropped_empty, 1);
  EXPECT_EQ(stats.kept, 3);
}

TEST(L10nCleanupTest, PairDeduperKeepsFirstOfEachPair) {
  PairDeduper deduper;
  EXPECT_TRUE(deduper.Insert("Open", "Öffnen"));
  EXPECT_FALSE(deduper.Insert("Open", "Öffnen"));
  EXPECT_TRUE(deduper.Insert("Open", "Aufmachen"));  // Another translation is another pair.
  EXPECT_TRUE(deduper.Insert("Ope", "nÖffnen"));     // No ambiguity from concatenation.
  deduper.Clear();
  EXPECT_TRUE(deduper.Insert("Open", "Öffnen"));
}

TEST(L10nCleanupTest, RulesTolerateInvalidUtf8) {
  const std::string bad = "\xff\xfe_a\xc3";
  EXPECT_FALSE(StripAccelerators(bad).empty());
  EXPECT_FALSE(IsFormatOnly("a\xff"));
  std::vector<TextPair> out;
  CleanupStats stats;
  CleanMessagePair(bad, bad + "x", &out, &stats);
  EXPECT_THAT(out, ElementsAre(Pair(::testing::_, ::testing::_)));
  EXPECT_THAT(SplitLinePairs("", ""), ElementsAre(Pair("", "")));
  EXPECT_THAT(out.front().first, ::testing::Not(IsEmpty()));
}

}  // namespace
}  // namespace deepnet::data

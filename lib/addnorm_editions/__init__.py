"""The book's three editions: English, 简体中文 (translated, locales/zh_Hans) and 繁體中文 (derived from 简体 with
OpenCC, corrected by the glossary). `terms` reads the glossary's Chinese names, `catalogs` says which messages
lack a current translation and which translations lose a term or a piece of markup, `traditional` derives the
繁體 catalogs."""

LANGUAGES = {"zh_Hans": "zh-hans", "zh_Hant": "zh-hant"}   # Sphinx language → the edition's folder in the site
TRANSLATED = "zh_Hans"                                      # the one kept by hand under locales/

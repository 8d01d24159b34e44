from traceviz.cli import entry

entry()

from traceviz.entry import entry

entry()

-- Compressor recovery metadata stored beside the original (a11y uid maps).
ALTER TABLE recoveries ADD COLUMN metadata BLOB;

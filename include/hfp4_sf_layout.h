/*
 * hfp4_sf_layout.h - the scale-factor layout toolkit (part of the public API; included by hfp4.h).
 * (Being written: see issue 6.)
 */
#ifndef HFP4_SF_LAYOUT_H
#define HFP4_SF_LAYOUT_H
#endif
